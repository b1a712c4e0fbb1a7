#!/usr/bin/env bash
# Installs every Debian package korch needs to build and test. Idempotent:
# packages already present are skipped, so a second run is a no-op.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev nlohmann-json3-dev libsimdjson-dev libsqlite3-dev sqlite3
  libcpp-httplib-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libtomlplusplus-dev libssl-dev libseccomp-dev libgoogle-perftools-dev
  prometheus-cpp-dev libboost-dev python3-websockets python3-jsonschema
  python3 python3-dev pybind11-dev libtorch-dev python3-torch python3-numpy
  chromium libpq-dev postgresql-15 python3-yaml ccache
)
# chromium: the headless browser of the dashboard and HTML report tests
# (they skip without it). libgoogle-perftools-dev: tcmalloc, the allocator of
# the korch executables (util/allocator/allocator.hpp; -DKORCH_ALLOCATOR=system
# builds without it). On Ubuntu 24.04 the package is a snap wrapper;
# KORCH_CHROMIUM may name another Chromium binary.
# libpq-dev: the PostgreSQL store backend (store/pg*.cpp). postgresql-15: the
# server binaries the store tests start as throwaway servers of their own
# (scripts/pg-test-server.sh); korch needs no system PostgreSQL service.
# ccache: scripts/build.sh compiles through it when present, so a second
# checkout (a worktree, a fresh clone) reuses the objects of the first.
# python3-yaml: the schema test of examples/k8s/ (tests/tools/test_k8s_manifests.py).
# Slurm (munge, slurmctld, slurmd) is not here: scripts/slurm-test.sh, which
# is opt-in, installs it.

# node and npm run the independent test peers (scripts/install-test-npm.sh:
# the @dwmkerr/mock-llm server, playwright-core). Debian's packages only where
# the machine has no node/npm of its own (a newer one from elsewhere stays).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

# A GPU box brings its own CUDA torch (pip or a venv): then Debian's CPU
# torch is not installed. KORCH_PYTHON names that interpreter; without it a
# python3 on PATH whose torch has CUDA counts too. Package names are the same
# on Debian 12 and Ubuntu 24.04.
own_torch() {
  local py=${KORCH_PYTHON:-python3}
  "$py" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null
}
if own_torch; then
  echo "install-deps: using the CUDA torch of ${KORCH_PYTHON:-python3}; skipping Debian's CPU torch"
  filtered=()
  for p in "${PACKAGES[@]}"; do
    case $p in libtorch-dev|python3-torch) ;; *) filtered+=("$p");; esac
  done
  PACKAGES=("${filtered[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
