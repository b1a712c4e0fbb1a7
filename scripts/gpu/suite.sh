#!/usr/bin/env bash
# Named suites for the GPU machine; logs and JSON go to $OUT (or
# /tmp/korch-gpu-out). Build first with scripts/gpu/build.sh.
#   scripts/gpu/suite.sh diag        machine facts + a CPU-mode evaluation
#   scripts/gpu/suite.sh ctest       the CTest suite (GPU tests included)
#   scripts/gpu/suite.sh smoke       a few small candidates in cpu and gpu mode
#   scripts/gpu/suite.sh corpus      every GPU corpus candidate through korch eval --device cuda
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/korch-gpu-out}
mkdir -p "$OUT"
B=${KORCH_BUILD_DIR:-build-gpu}
export KORCH_CACHE_DIR=${KORCH_CACHE_DIR:-/var/tmp/korch-cache}
PY=$(grep -m1 '^Python3_EXECUTABLE' "$B/CMakeCache.txt" | cut -d= -f2)
# Keep NVLink multicast off in everything korch starts (multi-GPU hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

korch_eval() {  # task code mode device -> JSON line on stdout
  "$B/bin/korch" eval --task "$1" --code "$2" --mode "$3" --device "$4" --json --cache-dir "$KORCH_CACHE_DIR"
}

case ${1:-diag} in
  diag)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/nvidia-smi.txt"
    timeout 180 "$PY" scripts/gpu/probe.py > "$OUT/probe.json" 2> "$OUT/probe.err"; echo "probe rc=$?"
    for i in 1 2; do
      timeout 300 /usr/bin/time -f "wall %e s" "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py \
        --code tests/evaluator/corpus/good/cpp_relu.py --device cpu --mode submit --json \
        --cache-dir "$KORCH_CACHE_DIR" 2>&1 | tee "$OUT/cpu_relu_$i.json"
    done
    ;;
  smoke)
    # One CPU-mode and a few GPU-mode evaluations of small candidates.
    for c in tests/evaluator/corpus/good/cpp_relu.py tests/evaluator/corpus/good/triton_relu.py \
             tests/evaluator/corpus/good/cuda_relu.py tests/evaluator/corpus/equal_work/relu_at.py; do
      n=$(basename "$c" .py)
      dev=cuda; [[ $n == cpp_relu ]] && dev=cpu
      timeout 400 "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py --code "$c" --device $dev \
        --mode submit --json --cache-dir "$KORCH_CACHE_DIR" > "$OUT/smoke_$n.json" 2> "$OUT/smoke_$n.err"
      echo "smoke $n ($dev): rc=$? $(head -c 600 "$OUT/smoke_$n.json")"
    done
    ;;
  corpus)
    timeout 3000 "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --out "$OUT/corpus.json" "${@:2}" 2>&1 | tee "$OUT/corpus.log"
    ;;
  ctest)
    (cd "$B" && ctest --output-on-failure --timeout 900 -j 4 "${@:2}") 2>&1 | tee "$OUT/ctest.log"
    ;;
  *)
    echo "suite.sh: unknown suite '$1'" >&2; exit 2;;
esac
