#!/usr/bin/env bash
# Installs node-llama-cpp with its prebuilt CPU binary for Linux x64 (@node-llama-cpp/linux-x64) into
# .cache/node-llama-cpp of the checkout, for the test that loads an exported GGUF in llama.cpp
# (test/export/gguf.test.ts). Not a dependency of nexrl: as one, npm would also install its optional
# CUDA and Vulkan binaries (about 600 MB). Pinned, optional packages omitted, install scripts not run
# (they would look for a GPU build). Idempotent: does nothing when that version is there. Elsewhere than
# Linux x64 it says so and exits 0, and the test skips with a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.22.1
prefix=.cache/node-llama-cpp
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "ensure-node-llama-cpp: the prebuilt binary installed here is for Linux x64; the GGUF loading test is skipped" >&2
  exit 0
fi
installed() {
  node -e 'const [dir, v] = process.argv.slice(1); for (const p of ["node-llama-cpp", "@node-llama-cpp/linux-x64"])
    if (require(`${dir}/node_modules/${p}/package.json`).version !== v) process.exit(1);' "$PWD/$prefix" "$version" 2>/dev/null
}
if ! installed; then
  npm install --silent --no-save --no-package-lock --no-audit --no-fund --omit=optional --ignore-scripts \
    --prefix "$prefix" "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" >&2
fi
