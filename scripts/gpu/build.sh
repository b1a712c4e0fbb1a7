#!/usr/bin/env bash
# Run on the GPU machine (no package registry): unpacks .gpu-deps/debs
# (made by scripts/gpu/prepare.sh on a Debian box), configures korch against
# this machine's own torch + Python, and builds with every core into
# ${KORCH_BUILD_DIR:-build-gpu}.
#   KORCH_PYTHON=/path/to/python3   the interpreter whose torch to use
#   KORCH_BUILD_TARGETS="a b"       build only these targets
#                                   (default: python3 on PATH, then /opt/torch/.venv)
# On a GPU box WITH a registry, run scripts/install-deps.sh instead and then
# this script (it skips the unpacking when .gpu-deps/debs is absent).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
BUILD_DIR=${KORCH_BUILD_DIR:-build-gpu}

PY=${KORCH_PYTHON:-}
if [[ -z $PY ]]; then
  for cand in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import torch' 2>/dev/null; then PY=$(command -v "$cand"); break; fi
  done
fi
[[ -n $PY ]] || { echo "gpu/build: no python3 with torch found; set KORCH_PYTHON" >&2; exit 2; }
TORCH_CMAKE=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "gpu/build: python $PY, torch $("$PY" -c 'import torch; print(torch.__version__)'), cmake $TORCH_CMAKE"

PREFIXES="$TORCH_CMAKE"
RPATH=()
if [[ -d .gpu-deps/debs ]]; then
  ROOT=$REPO/.gpu-deps/root
  rm -rf "$ROOT" && mkdir -p "$ROOT"
  for d in .gpu-deps/debs/*.deb; do dpkg -x "$d" "$ROOT"; done
  LIB=$ROOT/usr/lib/x86_64-linux-gnu
  # The -dev packages' lib*.so links point at runtime libraries we did not
  # unpack: point them at this machine's own.
  for name in curl sqlite3 seccomp brotlicommon brotlidec brotlienc; do
    link=$LIB/lib$name.so
    [[ -L $link || ! -e $link ]] || continue
    target=$(ls /usr/lib/x86_64-linux-gnu/lib$name.so.* /lib/x86_64-linux-gnu/lib$name.so.* 2>/dev/null | sort | head -1 || true)
    if [[ -n $target ]]; then ln -sf "$target" "$link"; else echo "gpu/build: warning: no runtime lib$name here" >&2; fi
  done
  for pc in "$LIB"/pkgconfig/*.pc "$ROOT"/usr/share/pkgconfig/*.pc; do
    [[ -f $pc ]] && sed -i "s|^prefix=.*|prefix=$ROOT/usr|" "$pc"
  done
  export PKG_CONFIG_PATH="$LIB/pkgconfig:$ROOT/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  PREFIXES="$PREFIXES;$ROOT/usr"
  # The runtime path of the binaries: a folder of links to the carried shared
  # libraries this machine lacks (libpq5 and what it needs: libldap, libsasl2,
  # ...), and to none it has, so a carried copy never shadows the host's own.
  # DT_RPATH (not RUNPATH) because the loader applies it to the libraries'
  # own needs too (libpq -> libldap), which RUNPATH does not.
  RT=$REPO/.gpu-deps/rt
  rm -rf "$RT" && mkdir -p "$RT"
  for so in "$LIB"/lib*.so.*; do
    [[ -e $so ]] || continue
    soname=$(basename "$so")
    ldconfig -p | grep -q "^[[:space:]]*$soname " && continue
    ln -sf "$so" "$RT/$soname"
  done
  echo "gpu/build: $(ls "$RT" | wc -l) carried libraries this machine lacks, on the binaries' runtime path ($RT)"
  RPATH=(-DCMAKE_BUILD_RPATH="$RT" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags"
         "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags" "-DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags")
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
tests=ON
# The PostgreSQL store backend only where libpq is installed (the GPU machine
# has no registry to get it from; its evaluations need no server store).
pg=OFF
pkg-config --exists libpq 2>/dev/null && pg=ON
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$PREFIXES" -DPython3_EXECUTABLE="$PY" -DKORCH_BUILD_TESTS=$tests \
  -DKORCH_WITH_POSTGRES=$pg "${RPATH[@]}" "$@" \
  >"$BUILD_DIR.configure.log" 2>&1 || {
    echo "gpu/build: configure failed; last lines:" >&2; tail -30 "$BUILD_DIR.configure.log" >&2; exit 1; }
# KORCH_BUILD_TARGETS="korch korch-worker ...": only those (the suites need
# korch, korch-worker, korch-bench-eval and korch-fake-llm).
if [[ -n ${KORCH_BUILD_TARGETS:-} ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target $KORCH_BUILD_TARGETS
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
# Check that what was built runs here: every library found, korch starts.
bad=0
for bin in "$BUILD_DIR"/bin/* "$BUILD_DIR"/tests/support/korch-fake-llm; do
  [[ -f $bin && -x $bin ]] || continue
  if missing=$(ldd "$bin" 2>&1 | grep "not found"); [[ -n $missing ]]; then
    echo "gpu/build: $bin cannot start here, libraries not found:" >&2; echo "$missing" >&2; bad=1
  fi
done
if [[ -x $BUILD_DIR/bin/korch ]]; then
  v=$("$BUILD_DIR/bin/korch" --version 2>&1) || { echo "gpu/build: korch --version failed: $v" >&2; bad=1; }
  [[ $bad == 0 ]] && echo "gpu/build: $v"
fi
((bad == 0)) || { echo "gpu/build: FAILED: the binaries built do not run on this machine" >&2; exit 1; }
echo "gpu/build: built into $BUILD_DIR"
