#!/usr/bin/env bash
# Installs Debian's redis-server for the tests of the distributed rollouts (test/distributed/),
# which start their own server on 127.0.0.1 on a free port; nothing is downloaded but the Debian package.
# Idempotent: does nothing when redis-server is on the PATH. Needs apt and root, or sudo without a password (GitHub's runners);
# elsewhere it says what to do and exits 0, and those tests skip with a warning.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
fi
if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; }; then
  echo "ensure-redis: redis-server is missing and this is neither root nor passwordless sudo with apt-get;" \
    "install Debian's redis-server package (or put any redis-server >= 6.2 on the PATH) to run the distributed" \
    "rollout tests (they are skipped without it)" >&2
  exit 0
fi
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
redis-server --version
