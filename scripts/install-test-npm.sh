#!/usr/bin/env bash
# Installs the npm packages the tests use, exactly as pinned in their
# package-lock.json files (npm ci): @dwmkerr/mock-llm, an independent
# OpenAI-compatible mock server (tests/llm_clients/test_mock_llm.cpp), and
# playwright-core, the CDP driver of the dashboard test in headless Chromium
# (tests/integration/test_dashboard.cpp; it drives Debian's chromium from
# scripts/install-deps.sh and downloads no browser). The
# tests skip themselves (GTEST_SKIP) when node/npm or the packages are absent,
# except under KORCH_CI=1 (.ci/run), where a missing peer fails this script
# and the tests (tests/support/required.hpp).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dirs=("$root/tests/llm_clients/mock-llm" "$root/tests/integration/dashboard")

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  if [[ ${KORCH_CI:-0} == 1 ]]; then
    echo "install-test-npm: node/npm not found (scripts/install-deps.sh installs them)" >&2
    exit 1
  fi
  echo "install-test-npm: node/npm not found; npm-based tests will be skipped"
  exit 0
fi

for dir in "${dirs[@]}"; do
  lock="$dir/package-lock.json"
  stamp="$dir/node_modules/.package-lock.json"
  # npm ci wipes node_modules; skip it when the installed tree matches the lock.
  if [[ -f "$stamp" && "$stamp" -nt "$lock" ]]; then
    echo "install-test-npm: ${dir#$root/} up to date"
    continue
  fi
  echo "install-test-npm: npm ci in ${dir#$root/}"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
