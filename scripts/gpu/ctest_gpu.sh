#!/usr/bin/env bash
# ctest's GPU corpus targets (label gpu; tests/evaluator/CMakeLists.txt):
#   ctest_gpu.sh MANIFEST KORCH PYTHON
# Every entry of the manifest through `korch eval --device cuda`, each
# verdict as expected (scripts/gpu/run_corpus.py). Exit 77 (ctest: skipped)
# only where the host has no NVIDIA device; a missing KernelBench copy or a
# broken evaluator on a GPU host fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
MANIFEST=$1 KORCH=$2 PY=${3:-python3}
if [[ ! -e /dev/nvidia0 && ! -e /dev/nvidiactl ]]; then
  echo "ctest_gpu: no NVIDIA device on this host"
  exit 77
fi
KB=${KORCH_KERNELBENCH:-}
for c in "$KB" .gpu-deps/kernelbench ../shared/kernelbench; do
  [[ -n $c && -d $c/level1 ]] && { KB=$c; break; }
done
[[ -d $KB/level1 ]] || { echo "ctest_gpu: no KernelBench copy (KORCH_KERNELBENCH, .gpu-deps/kernelbench or ../shared/kernelbench)"; exit 1; }
exec "$PY" scripts/gpu/run_corpus.py --korch "$KORCH" --manifest "$MANIFEST" --kernelbench "$KB" \
  --cache-dir "${KORCH_CACHE_DIR:-/var/tmp/korch-cache}" --jobs "${KORCH_CORPUS_JOBS:-4}" --eval-timeout 150 \
  ${KORCH_CORPUS_OUT:+--out "$KORCH_CORPUS_OUT/$(basename "$MANIFEST")"}
