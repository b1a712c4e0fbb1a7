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
  # PostgreSQL 15 for `suite.sh worker` (a server, libpq for the PostgreSQL
  # store) and the libraries its binaries link that a bare machine may lack.
  # Not carried: libc6, libstdc++6, libgcc-s1, zlib1g (every machine has
  # them; the unpacked copies would shadow the host's) and libllvm14 (only
  # the JIT provider loads it; without it the server runs without JIT).
  postgresql-15 postgresql-client-15 postgresql-common postgresql-client-common
  libpq5 libpq-dev
  libicu72 libxml2 libxslt1.1 liblz4-1 libzstd1 libreadline8 libssl3 libuuid1
  libldap-2.5-0 libsasl2-2 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
  libkeyutils1 libcom-err2 libpam0g libsystemd0 libselinux1 libpcre2-8-0 libcap2
  libgcrypt20 libgpg-error0
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
