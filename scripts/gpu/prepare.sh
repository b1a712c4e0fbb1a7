#!/usr/bin/env bash
# Run on a Debian 12 machine WITH a package registry (a developer box, CI):
# fetches into .gpu-deps/debs the Debian -dev packages that a bare GPU
# machine without a registry lacks (see docs/gpu.md). The folder is
# git-ignored; carry it to the GPU machine with the working tree, then run
# scripts/gpu/build.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
PKGS=(
  libcurl4-openssl-dev libsqlite3-dev
  libsimdjson-dev libsimdjson14
  libgoogle-perftools-dev libtcmalloc-minimal4
  libcpp-httplib-dev libcpp-httplib0.11
  libtomlplusplus-dev libtomlplusplus3
  libseccomp-dev libbrotli-dev
  prometheus-cpp-dev libprometheus-cpp-core1.0
)
mkdir -p .gpu-deps/debs
cd .gpu-deps/debs
missing=()
for p in "${PKGS[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  # apt's sandbox user cannot write here when we run as root; that is fine.
  apt-get download "${missing[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
fi
for p in "${PKGS[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || { echo "prepare: could not fetch $p" >&2; exit 1; }
done
echo "prepare: $(ls | wc -l) packages in .gpu-deps/debs ($(du -sh . | cut -f1))"
# The KernelBench problems travel too (the GPU machine sees only the working
# tree): KORCH_KERNELBENCH=path, else ../shared/kernelbench beside the checkout.
cd ../..
KB=${KORCH_KERNELBENCH:-../shared/kernelbench}
if [[ -d $KB/level1 ]]; then
  rm -rf .gpu-deps/kernelbench && mkdir .gpu-deps/kernelbench && cp -r "$KB"/level1 "$KB"/level2 "$KB"/level3 "$KB"/LICENSE .gpu-deps/kernelbench/
  echo "prepare: KernelBench levels 1-3 copied into .gpu-deps/kernelbench"
else
  echo "prepare: no KernelBench at $KB (set KORCH_KERNELBENCH); GPU suites that need it will skip"
fi
