#!/usr/bin/env bash
# Installs Debian's chromium for the browser test of `nexrl report` (test/report/browser.test.ts),
# which drives it with playwright-core; nothing is downloaded but the Debian package.
# Idempotent: does nothing when /usr/bin/chromium exists. Needs apt and root, or sudo without a password (GitHub's runners);
# elsewhere it says what to do and exits 0, and the browser test skips with a warning.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
fi
if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; }; then
  echo "ensure-chromium: /usr/bin/chromium is missing and this is neither root nor passwordless sudo with apt-get;" \
    "install Debian's chromium package to run the report's browser test (it is skipped without it)" >&2
  exit 0
fi
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --version
