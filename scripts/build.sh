#!/usr/bin/env bash
# Configures and builds korch into build/ (Release with debug info).
# Everything it needs comes from scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KORCH_BUILD_DIR:-build}
JOBS=${KORCH_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
