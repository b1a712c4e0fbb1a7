#!/usr/bin/env bash
# Named suites for the GPU machine; each prints its log on stdout (tee it to
# $OUT/<suite>.log); corpus results also go to $OUT/corpus.json. Build first
# with scripts/gpu/build.sh.
#   scripts/gpu/suite.sh diag        machine facts + a CPU-mode evaluation
#   scripts/gpu/suite.sh campaign    korch run over level-1 tasks (replay server), report, export
#   scripts/gpu/suite.sh validate    korch tasks validate on the GPU (levels 1-3)
#   scripts/gpu/suite.sh bench [N]   equal-work speedups on three sizes; zygote vs fresh process
#   scripts/gpu/suite.sh equalwork [N] [TASK...]  N evaluations of each equal-work candidate, ~4 us to ~50 ms
#                                    a call; every report's JSON (raw samples) in $OUT/equalwork_<task>.jsonl
#   scripts/gpu/suite.sh ctest [ARGS]  the CTest suite (GPU tests included); `ctest -L gpu`: the GPU
#                                    evaluator tests and both KernelBench GPU corpora (ctest_gpu.sh)
#   scripts/gpu/suite.sh smoke       a few small candidates in cpu and gpu mode
#   scripts/gpu/suite.sh public      public KernelBench solutions (.pubsol, carried): independent harness,
#                                    korch run, comparison (scripts/gpu/public_solutions.py)
#   scripts/gpu/suite.sh mix [TAG]   the throughput mix (issue #35): 60 level-1/2 tasks, one correct candidate
#                                    each (task's torch + a Triton or CUDA stage; scripts/gpu/mix.py), korch run
#                                    from an empty compile cache; rate, GPU busy, lease by phase ($OUT/mix_TAG.json)
#   scripts/gpu/suite.sh corpus      every GPU corpus candidate through korch eval --device cuda
#   scripts/gpu/suite.sh cpumode     the CPU evaluator on this machine's torch (full JSON in $OUT)
#   scripts/gpu/suite.sh hang        an infinite-loop kernel, then a correct one on the same GPU
#   scripts/gpu/suite.sh placement   a short kernel's time by device address and by process (tools/bench/gpu_placement.py)
#   scripts/gpu/suite.sh throughput [N] [M]  N new load_inline candidates pipelined vs M compiled under the lease
#   scripts/gpu/suite.sh fidelity [N]  N evaluations of four candidates each, next to triton do_bench
#   scripts/gpu/suite.sh overhead [N]  overhead per evaluation: zygote vs a fresh process per job
#   scripts/gpu/suite.sh pool [SAMPLES]  the GPU campaign on GPU 0, then on GPUs 0,1 (a crashing candidate included)
#   scripts/gpu/suite.sh revalidate  korch tasks validate on the tasks flagged over_budget before the budget fix
#   scripts/gpu/suite.sh domain      the structured-input / norm / softmax corpus (manifest_domain.json),
#                                    then the symbol census of every cached build (symbol_census.py)
#   scripts/gpu/suite.sh concurrent [N] [FILTER]  N korch eval processes of the GPU corpus at once (one
#                                    entry at a time each) next to one sequential run: same verdicts;
#                                    the host-wide GPU lease serialises their measurements
#   scripts/gpu/suite.sh worker      the evaluation queue on the GPU: a PostgreSQL 15 server (carried by
#                                    prepare.sh), `korch worker --evaluator gpu` and a `korch run`
#                                    coordinator with evaluator.remote = true over the GPU campaign;
#                                    verdicts compared with the same campaign in in-process gpu mode
#   scripts/gpu/suite.sh evidence [STEPS]  builds, then ctest -L gpu, mix, worker, public in one call, one
#                                    summary table (scripts/gpu/evidence.sh)
# KORCH_GPUS selects the GPUs of bench/throughput/fidelity/validate (default: all).
set -uo pipefail
cd "$(dirname "$0")/../.."
# `suite.sh evidence [STEPS]`: build, then the GPU evidence steps (evidence.sh).
[[ ${1:-} == evidence ]] && exec bash scripts/gpu/evidence.sh "${@:2}"
OUT=${OUT:-/tmp/korch-gpu-out}
mkdir -p "$OUT"
B=${KORCH_BUILD_DIR:-build-gpu}
export KORCH_CACHE_DIR=${KORCH_CACHE_DIR:-/var/tmp/korch-cache}
PY=$(grep -m1 '^Python3_EXECUTABLE' "$B/CMakeCache.txt" | cut -d= -f2)
# Keep NVLink multicast off in everything korch starts (multi-GPU hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

start_replay() {  # replay-file work-dir -> the replay server in the background: FAKE (pid), PORT
  "$B/tests/support/korch-fake-llm" --port 0 --script "replay:$1" >"$2/replay.out" 2>"$2/replay.err" &
  FAKE=$!
  for _ in $(seq 100); do grep -q '^PORT ' "$2/replay.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(awk '/^PORT /{print $2; exit}' "$2/replay.out")
}

korch_eval() {  # task code mode device -> JSON line on stdout
  "$B/bin/korch" eval --task "$1" --code "$2" --mode "$3" --device "$4" --json --cache-dir "$KORCH_CACHE_DIR"
}

case ${1:-diag} in
  diag)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    timeout 180 "$PY" scripts/gpu/probe.py; echo "probe rc=$?"
    for i in 1 2; do
      timeout 300 /usr/bin/time -f "wall %e s" "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py \
        --code tests/evaluator/corpus/good/cpp_relu.py --device cpu --mode submit --json \
        --cache-dir "$KORCH_CACHE_DIR" 2>&1 | cut -c1-3000
    done
    ;;
  smoke)
    # One CPU-mode and a few GPU-mode evaluations of small candidates.
    for c in tests/evaluator/corpus/good/cpp_relu.py tests/evaluator/corpus/good/triton_relu.py \
             tests/evaluator/corpus/good/cuda_relu.py tests/evaluator/corpus/equal_work/relu_at.py; do
      n=$(basename "$c" .py)
      dev=cuda; [[ $n == cpp_relu ]] && dev=cpu
      timeout 400 "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py --code "$c" --device $dev \
        --mode submit --json --cache-dir "$KORCH_CACHE_DIR" > /tmp/smoke_$n.json 2> /tmp/smoke_$n.err
      echo "== smoke $n ($dev): rc=$?"; cut -c1-4000 /tmp/smoke_$n.json; tail -5 /tmp/smoke_$n.err
    done
    ;;
  cpumode)
    timeout 300 "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py \
      --code tests/evaluator/corpus/good/cpp_relu.py --device cpu --mode submit --json \
      --cache-dir "$KORCH_CACHE_DIR" > "$OUT/cpu_relu.json"
    echo "cpumode rc=$?"; cut -c1-400 "$OUT/cpu_relu.json"
    korch_eval examples/tasks/1_ReLU_small.py tests/evaluator/corpus/good/triton_relu.py submit cuda \
      > "$OUT/triton_relu.json"
    echo "triton_relu rc=$?"; cut -c1-400 "$OUT/triton_relu.json"
    ;;
  hang)
    # The hang is ended by the evaluation's own limit; the GPU must then
    # score the next candidate correctly.
    timeout 400 "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --only hacks/infinite_loop --eval-timeout "${2:-45}" 2>&1
    timeout 120 "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --only good/triton_layernorm 2>&1
    ;;
  domain)
    timeout "${KORCH_DOMAIN_TIMEOUT:-3000}" "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest_domain.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --out "$OUT/domain.json" --jobs "${KORCH_CORPUS_JOBS:-4}" "${@:2}" 2>&1
    "$PY" scripts/gpu/symbol_census.py "$KORCH_CACHE_DIR" 2>&1
    ;;
  concurrent)
    N=${2:-7}
    ONLY=(); [[ -n ${3:-} ]] && ONLY=(--only "$3")
    run() {  # out-file
      "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" --manifest tests/evaluator/corpus/gpu/manifest.json \
        --kernelbench .gpu-deps/kernelbench --cache-dir "$KORCH_CACHE_DIR" --out "$1" "${ONLY[@]}" 2>&1
    }
    run "$OUT/concurrent_seq.json" > "$OUT/concurrent_seq.log"
    echo "sequential: $(tail -1 "$OUT/concurrent_seq.log")"
    for i in $(seq "$N"); do run "$OUT/concurrent_$i.json" > "$OUT/concurrent_$i.log" & done
    wait
    for i in $(seq "$N"); do echo "process $i: $(tail -1 "$OUT/concurrent_$i.log")"; done
    "$PY" - "$OUT" "$N" <<'PYEOF'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
seq = {r["file"]: r for r in json.load(open(out + "/concurrent_seq.json"))}
diff = 0
for i in range(1, n + 1):
    for r in json.load(open("%s/concurrent_%d.json" % (out, i))):
        s = seq.get(r["file"])
        if s is None or s["status"] != r["status"]:
            diff += 1
            print("DIFFERS process %d %s: %s vs sequential %s" % (i, r["file"], r["status"], s and s["status"]))
print("concurrent: %d processes, %d verdicts differ from the sequential run" % (n, diff))
PYEOF
    "$PY" -c "
import glob, json
w = [r['stages'].get('host_lease_wait_s', 0) for f in glob.glob('$OUT/concurrent_[0-9]*.json') for r in json.load(open(f)) if r.get('stages')]
print('host lease waits: %d evaluations, %d waited, max %.1f s, total %.1f s' % (len(w), sum(x > 0.01 for x in w), max(w or [0]), sum(w)))"
    grep -l "failed its health check" "$OUT"/concurrent_*.log 2>/dev/null | head
    ;;
  public)
    # Public KernelBench solutions (issue #32): the independent harness on GPU
    # KORCH_HARNESS_GPU (KORCH_PUBLIC_HARNESS=0: skip it) beside korch run on
    # KORCH_GPUS, then the comparison. Needs .pubsol/ (scripts/gpu/
    # public_solutions.py collect, carried: the solutions are fetched, never
    # committed). KORCH_PUBLIC_DB=path resumes a campaign an earlier call left
    # (it is copied back to $OUT/public_campaign.db after a WAL checkpoint).
    [[ -f .pubsol/manifest.json ]] || { echo "public: no .pubsol/manifest.json (run collect, carry .pubsol)"; exit 2; }
    W=$(mktemp -d /var/tmp/korch-public.XXXX)
    DB=$W/campaign.db
    [[ -n ${KORCH_PUBLIC_DB:-} && -f $KORCH_PUBLIC_DB ]] && cp "$KORCH_PUBLIC_DB" "$DB" && chmod u+w "$DB" && echo "public: resuming $KORCH_PUBLIC_DB"
    HARNESS=
    if [[ ${KORCH_PUBLIC_HARNESS:-1} == 1 ]]; then
      CUDA_VISIBLE_DEVICES=${KORCH_HARNESS_GPU:-0} timeout "${KORCH_HARNESS_TIMEOUT:-900}" "$PY" \
        scripts/gpu/public_solutions.py harness --dir .pubsol --kernelbench .gpu-deps/kernelbench \
        --jobs "${KORCH_HARNESS_JOBS:-8}" --python "$PY" --out "$OUT" --resume .pubsol/harness.json \
        > "$OUT/public_harness.log" 2>&1 &
      HARNESS=$!
    fi
    start_replay ".pubsol/replay.json" "$W"
    t0=$(date +%s)
    timeout -k 30 "${KORCH_CAMPAIGN_TIMEOUT:-1500}" "$B/bin/korch" run examples/gpu/public_solutions.toml \
      --set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "db_path=$DB" \
      --set "tasks.kernelbench_dir=$(pwd)/.gpu-deps/kernelbench" --set "evaluator.cache_dir=$KORCH_CACHE_DIR" \
      --set "evaluator.gpus=${KORCH_GPUS:-all}" --set "evaluator.compile_jobs=${KORCH_COMPILE_JOBS:-0}" \
      > "$OUT/public_run.log" 2>&1
    echo "korch run rc=$? in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/public_run.log"
    kill $FAKE
    if [[ -n $HARNESS ]]; then wait $HARNESS; echo "harness rc=$?"; tail -1 "$OUT/public_harness.log"; fi
    "$PY" -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$DB"
    cp "$DB" "$OUT/public_campaign.db"
    "$B/bin/korch" report --db "$DB" 2>&1 | tail -15
    H=$OUT/harness.json; [[ -f $H ]] || H=.pubsol/harness.json
    [[ -f $H ]] && "$PY" scripts/gpu/public_solutions.py compare --dir .pubsol --db "$DB" \
      --harness "$H" --out "$OUT/public_compare.json" 2>&1
    echo "health-check alarms: $(grep -c 'failed its health check' "$OUT/public_run.log")"
    grep -E "health check|infrastructure" "$OUT/public_run.log" | head -20
    ;;
  mix)
    # KORCH_MIX_RESUME=db resumes a campaign an earlier call left.
    TAG=${2:-run}
    "$PY" scripts/gpu/mix.py make --kernelbench .gpu-deps/kernelbench --out .mix-gen >/dev/null || exit 2
    W=$(mktemp -d /var/tmp/korch-mix.XXXX)
    DB=$W/campaign.db
    [[ -n ${KORCH_MIX_RESUME:-} ]] && cp "$KORCH_MIX_RESUME" "$DB" && chmod u+w "$DB"
    start_replay ".mix-gen/replay.json" "$W"
    IDS=$("$PY" -c "import json; print(','.join(map(str, json.load(open('.mix-gen/ids.json'))['1'])))")
    SLOTS=${KORCH_COMPILE_JOBS:-0}
    t0=$(date +%s)
    timeout -k 30 "${KORCH_CAMPAIGN_TIMEOUT:-900}" "$B/bin/korch" run examples/gpu/mix.toml \
      --set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "db_path=$DB" \
      --set "tasks.kernelbench_dir=$(pwd)/.gpu-deps/kernelbench" --set "tasks.ids=$IDS" \
      --set "evaluator.cache_dir=$KORCH_CACHE_DIR" --set "evaluator.gpus=${KORCH_GPUS:-all}" \
      --set "evaluator.compile_jobs=$SLOTS" > "$OUT/mix_${TAG}_run.log" 2>&1
    echo "korch run rc=$? in $(( $(date +%s) - t0 )) s"
    kill $FAKE
    "$PY" -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$DB"
    cp "$DB" "$OUT/mix_${TAG}.db"
    [[ $SLOTS == 0 ]] && SLOTS=$(grep -o -m1 "[0-9]* compile slot" "$OUT/mix_${TAG}_run.log" | cut -d' ' -f1)
    [[ -n $SLOTS ]] || SLOTS=$(( $(nproc) - 2 ))
    "$PY" scripts/gpu/mix.py report --db "$DB" --compile-slots "$SLOTS" --json "$OUT/mix_${TAG}.json"
    "$B/bin/korch" report --db "$DB" 2>&1 | tail -8
    echo "health-check alarms: $(cat "$OUT"/mix_${TAG}_*.log | grep -c 'failed its health check')"
    grep -h "prewarm" "$OUT"/mix_${TAG}_*.log | head -2
    ;;
  corpus)
    timeout 3000 "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --out "$OUT/corpus.json" --jobs "${KORCH_CORPUS_JOBS:-4}" "${@:2}" 2>&1
    ;;
  campaign)
    # korch run over level-1 tasks on the GPU, answered by the replay server.
    W=$(mktemp -d /var/tmp/korch-campaign.XXXX)
    start_replay "examples/gpu/replay.json" "$W"
    SETS=(--set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "db_path=$W/campaign.db"
          --set "tasks.kernelbench_dir=$(pwd)/.gpu-deps/kernelbench" --set "evaluator.cache_dir=$KORCH_CACHE_DIR")
    [[ -n ${KORCH_CAMPAIGN_IDS:-} ]] && SETS+=(--set "tasks.ids=$KORCH_CAMPAIGN_IDS")
    timeout "${KORCH_CAMPAIGN_TIMEOUT:-1500}" "$B/bin/korch" run examples/gpu/campaign.toml "${SETS[@]}" \
      > "$OUT/campaign_run.log" 2>&1
    echo "korch run rc=$?"; tail -5 "$OUT/campaign_run.log"
    "$B/bin/korch" report --db "$W/campaign.db" 2>&1
    "$B/bin/korch" export --db "$W/campaign.db" --format jsonl --out "$OUT/campaign_export.jsonl"
    kill $FAKE
    ;;
  validate)
    timeout 1500 "$B/bin/korch" tasks validate .gpu-deps/kernelbench --levels "${2:-1,2,3}" --mode gpu \
      --cache-dir "$KORCH_CACHE_DIR" 2>&1
    ;;
  bench)
    # Overhead per evaluation (zygote vs a fresh process) and the equal-work
    # speedup on three sizes of ReLU (small, medium, KernelBench level1/19).
    "$B/tools/bench/korch-bench-eval" --device cuda --mode submit --repeat "${2:-5}" \
      --code tests/evaluator/corpus/equal_work/relu_at.py --cache "$KORCH_CACHE_DIR" \
      --task examples/tasks/1_ReLU_small.py --task examples/tasks/6_ReLU_large.py \
      --task .gpu-deps/kernelbench/level1/19_ReLU.py 2>&1 | grep -v '^\[W'
    "$B/tools/bench/korch-bench-eval" --device cuda --mode check --repeat 5 --fresh \
      --code tests/evaluator/corpus/good/triton_relu.py --cache "$KORCH_CACHE_DIR" \
      --task examples/tasks/1_ReLU_small.py 2>&1 | grep -v '^\[W'
    "$B/tools/bench/korch-bench-eval" --device cuda --mode check --repeat 5 \
      --code tests/evaluator/corpus/good/triton_relu.py --cache "$KORCH_CACHE_DIR" \
      --task examples/tasks/1_ReLU_small.py 2>&1 | grep -v '^\[W'
    ;;
  equalwork)
    # Issue #7's bar on the GPU: the equal-work candidates (the same ATen op
    # through a load_inline function) on tasks from ~4 us to ~50 ms a call,
    # N separate evaluations each. KORCH_EQUALWORK_ONLY=<substring> picks tasks.
    K=.gpu-deps/kernelbench/level1 R=tests/evaluator/corpus/equal_work/relu_at.py
    M=tests/evaluator/corpus/equal_work/matmul_at.py
    for pair in examples/tasks/1_ReLU_small.py:$R examples/tasks/6_ReLU_large.py:$R \
                $K/19_ReLU.py:$R $K/1_Square_matrix_multiplication_.py:$M examples/gpu/tasks/Matmul_large.py:$M; do
      t=${pair%%:*}; c=${pair#*:}; n=$(basename "$t" .py)
      [[ -n ${KORCH_EQUALWORK_ONLY:-} && $t != *${KORCH_EQUALWORK_ONLY}* ]] && continue
      echo "== equalwork $(basename "$c") on $n"
      timeout -s KILL "${KORCH_EQUALWORK_TIMEOUT:-400}" "$B/tools/bench/korch-bench-eval" --device cuda \
        --mode submit --gpus "${KORCH_GPUS:-all}" --repeat "${2:-10}" --print --code "$c" \
        --cache "$KORCH_CACHE_DIR" --task "$t" 2>&1 | grep -v '^\[W' > "$OUT/equalwork_$n.out"
      grep -v '^{' "$OUT/equalwork_$n.out"; grep '^{' "$OUT/equalwork_$n.out" > "$OUT/equalwork_$n.jsonl"
    done
    ;;
  placement)
    for shape in 64,256 4096,4096; do
      timeout 200 "$PY" tools/bench/gpu_placement.py --mode processes --shape $shape --procs "${2:-8}" 2>&1
      timeout 200 "$PY" tools/bench/gpu_placement.py --mode placement --shape $shape --places "${2:-8}" 2>&1
    done
    ;;
  throughput)
    # Evaluations per hour when every candidate is a new load_inline kernel:
    # compiles pipelined off the GPU lease vs compiled under it (issue #9).
    "$B/tools/bench/korch-bench-eval" --device cuda --mode submit --gpus "${KORCH_GPUS:-all}" \
      --throughput "${2:-24}" --baseline "${3:-3}" --code tools/bench/candidates/cuda_relu_variant.py \
      --cache "${KORCH_CACHE_DIR}" --task .gpu-deps/kernelbench/level1/19_ReLU.py 2>&1
    ;;
  fidelity)
    # Timing fidelity: N evaluations of the same candidate (the first
    # included), speedup CV, and the medians next to triton's do_bench.
    # Classes: >= 100 us (GELU, LayerNorm) and >= 10 us (a Triton ReLU, ~30 us).
    G=tests/evaluator/corpus/gpu/good K=.gpu-deps/kernelbench/level1
    for pair in $G/cuda_new_gelu.py:$K/88_MinGPTNewGelu.py $G/triton_new_gelu_autotune.py:$K/88_MinGPTNewGelu.py \
                $G/triton_layernorm.py:$K/40_LayerNorm.py \
                tests/evaluator/corpus/good/triton_relu.py:examples/tasks/6_ReLU_large.py; do
      c=${pair%%:*}; t=${pair#*:}
      [[ -n ${KORCH_FIDELITY_ONLY:-} && $c != *${KORCH_FIDELITY_ONLY}* ]] && continue
      echo "== fidelity $(basename "$c") on $(basename "$t")"
      timeout -s KILL "${KORCH_FIDELITY_TIMEOUT:-400}" "$B/tools/bench/korch-bench-eval" --device cuda \
        --mode submit --gpus "${KORCH_GPUS:-all}" --repeat "${2:-10}" --do-bench --python "$PY" \
        --code "$c" --cache "$KORCH_CACHE_DIR" --task "$t" 2>&1 | grep -v '^\[W'
    done
    ;;
  overhead)
    # Overhead per evaluation: the zygote vs a fresh process per job (the
    # same CHECK of a cached Triton ReLU, N times each).
    for m in "" --fresh; do
      timeout -s KILL 200 "$B/tools/bench/korch-bench-eval" --device cuda --mode check --repeat "${2:-5}" $m \
        --gpus "${KORCH_GPUS:-all}" --code tests/evaluator/corpus/good/triton_relu.py \
        --cache "$KORCH_CACHE_DIR" --task examples/tasks/1_ReLU_small.py 2>&1 | grep -v '^\[W'
    done
    ;;
  pool)
    # Issue #12: the same campaign (cold caches each) on one GPU, then on
    # two; L1/88 is answered with a candidate that faults (illegal address).
    R=$(mktemp -d /var/tmp/korch-pool.XXXX)
    "$PY" - "$R/replay.json" <<'PYEOF'
import json, sys
d = json.load(open("examples/gpu/replay.json"))
bad = open("tests/evaluator/corpus/gpu/hacks/illegal_address.py").read()
for r in d["replies"]:
    if r["task"].startswith("88_"):
        r["content"] = "Here is a kernel.\n\n```python\n" + bad + "\n```\n"
json.dump(d, open(sys.argv[1], "w"))
PYEOF
    for spec in 0 0,1; do
      W="$R/gpus-${spec/,/-}"; mkdir -p "$W"
      start_replay "$R/replay.json" "$W"
      t0=$(date +%s.%N)
      limit=${KORCH_CAMPAIGN_TIMEOUT:-400}; [[ $spec == 0 ]] && limit=${KORCH_ONE_GPU_TIMEOUT:-$limit}
      timeout "$limit" "$B/bin/korch" run examples/gpu/campaign.toml \
        --set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "db_path=$W/campaign.db" \
        --set "tasks.kernelbench_dir=$(pwd)/.gpu-deps/kernelbench" --set "evaluator.cache_dir=$W/cache" \
        --set "evaluator.gpus=$spec" --set "samples_per_task=${2:-1}" > "$OUT/pool_run_${spec/,/-}.log" 2>&1
      echo "korch run (gpus $spec) rc=$?"
      t1=$(date +%s.%N)
      "$B/bin/korch" report --db "$W/campaign.db" 2>&1 | head -30
      "$PY" scripts/gpu/pool_stats.py "$W/campaign.db" "$(echo "$t1 - $t0" | bc)" "gpus=$spec"
      grep -h "GPU\|health" "$OUT/pool_run_${spec/,/-}.log" | head -20
      kill $FAKE
    done
    ;;
  revalidate)
    # The tasks the first H200 run flagged over_budget against the 4 GB CPU
    # default (the validator now applies the evaluator's GPU budget).
    for spec in "1 4,5,7,9,11,19-39,41-49,51-53,55,57,59,63,64,67,76,84,86,87,89-94,96-100" \
                "2 2,4,5,10,16,19,26,87,100" "3 17"; do
      set -- $spec
      timeout 900 "$B/bin/korch" tasks validate .gpu-deps/kernelbench --levels "$1" --ids "$2" --mode gpu \
        --gpus "${KORCH_GPUS:-all}" --cache-dir "$KORCH_CACHE_DIR" 2>&1
    done
    ;;
  large)
    timeout 900 "$PY" scripts/gpu/run_corpus.py --korch "$B/bin/korch" \
      --manifest tests/evaluator/corpus/gpu/manifest_large.json --kernelbench .gpu-deps/kernelbench \
      --cache-dir "$KORCH_CACHE_DIR" --out "$OUT/corpus_large.json" --jobs 1 2>&1
    ;;
  worker)
    # docs/cluster.md. The server binaries: this machine's postgresql-15, else
    # the ones prepare.sh carried (unpacked by build.sh into .gpu-deps/root).
    ROOT=$(pwd)/.gpu-deps/root
    if [[ ! -x /usr/lib/postgresql/15/bin/postgres && -x $ROOT/usr/lib/postgresql/15/bin/postgres ]]; then
      export KORCH_PG_BIN=$ROOT/usr/lib/postgresql/15/bin
      export LD_LIBRARY_PATH=$ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      export PATH=$ROOT/usr/lib/postgresql/15/bin:$PATH
    fi
    grep -q '^KORCH_WITH_POSTGRES:BOOL=ON' "$B/CMakeCache.txt" ||
      { echo "worker: $B was built without PostgreSQL (libpq-dev missing: run prepare.sh, build.sh)"; exit 1; }
    W=$(mktemp -d /var/tmp/korch-worker.XXXX)
    chmod 711 "$W"  # as root the PostgreSQL server runs as another user, who must enter it
    URL=$(scripts/pg-test-server.sh start "$W/pg" $$) || { echo "worker: no PostgreSQL server"; exit 1; }
    echo "worker: PostgreSQL at $URL"
    start_replay "examples/gpu/replay.json" "$W"
    SETS=(--set "models.replay.base_url=http://127.0.0.1:$PORT/v1"
          --set "tasks.kernelbench_dir=$(pwd)/.gpu-deps/kernelbench" --set "evaluator.cache_dir=$W/cache")
    [[ -n ${KORCH_CAMPAIGN_IDS:-} ]] && SETS+=(--set "tasks.ids=$KORCH_CAMPAIGN_IDS")
    # 1. In-process gpu mode on SQLite: the reference.
    timeout "${KORCH_CAMPAIGN_TIMEOUT:-1500}" "$B/bin/korch" run examples/gpu/campaign.toml "${SETS[@]}"       --set "db_path=$W/inprocess.db" > "$OUT/worker_inprocess.log" 2>&1
    echo "korch run (in-process gpu) rc=$?"
    # 2. The same campaign through the queue: one worker on every GPU here
    # (its own compile cache), the coordinator on the same PostgreSQL.
    "$B/bin/korch" worker --config examples/gpu/campaign.toml "${SETS[@]}" --store "$URL"       --evaluator gpu --gpus "${KORCH_GPUS:-all}" --cache-dir "$W/worker-cache" --id gpu-worker       > "$OUT/worker_worker.log" 2>&1 &
    WPID=$!
    timeout "${KORCH_CAMPAIGN_TIMEOUT:-1500}" "$B/bin/korch" run examples/gpu/campaign.toml "${SETS[@]}"       --set "store.url=$URL" --set evaluator.remote=true > "$OUT/worker_remote.log" 2>&1
    echo "korch run (coordinator, evaluator.remote) rc=$?"
    "$B/bin/korch" status --db "$URL" 2>&1 | tail -8
    kill -TERM $WPID; wait $WPID; echo "korch worker rc=$? (0: drained)"
    kill $FAKE
    "$B/bin/korch" export --db "$W/inprocess.db" --format jsonl --out "$OUT/worker_inprocess.jsonl"
    "$B/bin/korch" export --db "$URL" --format jsonl --out "$OUT/worker_remote.jsonl"
    psql -X -tA "$URL" -c "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE state = 'done') || ' done, ' || count(*) FILTER (WHERE claims > 1) || ' re-claimed; version ' || min(evaluator_version) FROM eval_queue" 2>&1
    # Same verdict (and correctness) per task, sample and turn; speedups are
    # measurements: shown side by side, not compared.
    "$PY" - "$OUT/worker_inprocess.jsonl" "$OUT/worker_remote.jsonl" <<'PYEOF'
import json, sys
def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("type") == "attempt":
            out[(r["task_id"], r["sample"], "t%s" % r["turn"])] = (r.get("eval_status"), r.get("check_correct"), None)
        elif r.get("type") == "episode":
            out[(r["task_id"], r["sample"], "final")] = (r.get("verdict"), r.get("correct"), r.get("speedup"))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
same = sum(1 for k in a if k in b and a[k][:2] == b[k][:2])
for k in sorted(set(a) | set(b)):
    print("  %-28s in-process %-30s remote %s" % ("%s s%s %s" % k, a.get(k), b.get(k)))
print("worker: %d of %d attempts and finals with the same verdict (remote has %d)" % (same, len(a), len(b)))
sys.exit(0 if a and same == len(a) == len(b) else 1)
PYEOF
    cmp=$?
    echo "worker: comparison rc=$cmp"
    scripts/pg-test-server.sh stop "$W/pg"
    exit $cmp
    ;;
  ctest)
    (cd "$B" && ctest --output-on-failure --timeout 900 -j 4 "${@:2}") 2>&1
    ;;
  *)
    echo "suite.sh: unknown suite '$1'" >&2; exit 2;;
esac
