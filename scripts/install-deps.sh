#!/usr/bin/env bash
# Installs every Debian package korch needs to build and test. Idempotent:
# packages already present are skipped, so a second run is a no-op.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev nlohmann-json3-dev libsqlite3-dev sqlite3
  libcpp-httplib-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libtomlplusplus-dev libssl-dev libseccomp-dev
  python3 python3-dev pybind11-dev libtorch-dev python3-torch python3-numpy
)

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
