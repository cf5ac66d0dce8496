#!/usr/bin/env bash
# Runs the tests of the agent service, the servers and the package under Node 24 (the tests that need Node >= 22,
# such as the agent SDKs', run only here). Uses $NODE24 when set, else installs it with scripts/ensure-node24.sh.
# Expects a built dist/ (npm test builds it); extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."
node24=${NODE24:-$(scripts/ensure-node24.sh)}
# Child processes that run `node` get Node 24 too.
PATH="$(dirname "$node24"):$PATH"
export PATH
node --version
exec node node_modules/vitest/vitest.mjs run test/agent test/server test/package.test.ts test/package-install.test.ts "$@"
