#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test.
#   scripts/test.sh                 # everything (CI runs exactly this)
#   scripts/test.sh -L agent        # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ ${KORCH_CI:-0} == 1 ]]; then
  scripts/install-test-npm.sh  # CI: the npm peers are required (their tests fail without them)
else
  scripts/install-test-npm.sh || echo "test.sh: npm test peers unavailable; their tests will be skipped"
fi
scripts/build.sh
cd "${KORCH_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 1200 -j "${KORCH_TEST_JOBS:-2}" "$@"
