#!/usr/bin/env bash
# Configures and builds korch into build/ (Release with debug info).
# Everything it needs comes from scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KORCH_BUILD_DIR:-build}
JOBS=${KORCH_JOBS:-$(nproc)}
LAUNCHER=()
if command -v ccache >/dev/null 2>&1 && [[ ${KORCH_CCACHE:-1} == 1 ]]; then
  # Objects keyed by content relative to the checkout's parent folder, so
  # checkouts side by side (worktrees, a fresh clone) share them.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)}
  export CCACHE_NOHASHDIR=1
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${LAUNCHER[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
