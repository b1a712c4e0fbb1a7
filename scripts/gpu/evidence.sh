#!/usr/bin/env bash
# GPU evidence in one call (issue #50): on a bare GPU machine with the carried
# .gpu-deps (scripts/gpu/prepare.sh) and, for `public`, .pubsol:
#
#   scripts/gpu/evidence.sh [STEPS]      STEPS: comma-separated, in this order by default:
#                                        ctest,mix,worker,public (also: large)
#
# 1. builds (scripts/gpu/build.sh, which fails unless its binaries run here),
#    then `korch --version` and one `korch eval` of a Triton ReLU;
# 2. runs each step through scripts/gpu/suite.sh:
#      ctest   `ctest -L gpu`: the GPU evaluator tests and the GPU corpora,
#              KORCH_CORPUS_JOBS (7) `korch eval` processes at once on the GPU
#      large   the corpus of tasks whose inputs are gigabytes (manifest_large.json)
#      mix     the throughput mix (60 level-1/2 tasks), the lease by phase
#      worker  `korch worker` on the GPU behind a PostgreSQL queue, verdicts
#              against the same campaign in-process
#      public  public KernelBench solutions against the independent harness
# 3. prints one summary table (scripts/gpu/evidence_summary.py).
#
# Results go to $OUT as they come, so a call cut short keeps what finished. The
# device tool brings back at most 8 files from $OUT, so there are three:
# evidence.log (everything printed), evidence.jsonl (one line a step) and
# evidence_files.tgz (every step's own files: logs, JSON, databases), rewritten
# after each step. Each step has a time cap (KORCH_EV_<STEP>_S) so the steps
# after it still run; the defaults fit two calls of ~12 minutes:
#   scripts/gpu/evidence.sh ctest,mix           # call 1
#   scripts/gpu/evidence.sh large,worker,public  # call 2
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
STEPS=${1:-ctest,mix,worker,public}
OUT=${OUT:-/tmp/korch-gpu-out}
mkdir -p "$OUT"
EVW=$(mktemp -d /var/tmp/korch-evidence.XXXX)
LOG=$OUT/evidence.log
ROWS=$OUT/evidence.jsonl
: >"$ROWS"
exec > >(tee -a "$LOG") 2>&1

row() {  # step rc seconds [key=value ...]: one JSON line into evidence.jsonl
  python3 - "$ROWS" "$@" <<'PYEOF'
import json, sys
path, step, rc, secs, *kv = sys.argv[1:]
r = {"step": step, "rc": int(rc), "seconds": round(float(secs), 1)}
for item in kv:
    k, _, v = item.partition("=")
    r[k] = v
open(path, "a").write(json.dumps(r) + "\n")
PYEOF
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
pack() { tar czf "$OUT/evidence_files.tgz.tmp" -C "$EVW" . 2>/dev/null && mv "$OUT/evidence_files.tgz.tmp" "$OUT/evidence_files.tgz"; }

echo "evidence: $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1), $(nproc) cores; steps $STEPS"

# --- build, version, one evaluation ---
t0=$(date +%s.%N)
# The targets the steps use (KORCH_BUILD_TARGETS= builds everything).
export KORCH_BUILD_TARGETS=${KORCH_BUILD_TARGETS-korch korch-worker korch-fake-llm test_gpu_evaluator}
KORCH_BUILD_DIR=${KORCH_BUILD_DIR:-build-gpu} bash scripts/gpu/build.sh >"$EVW/build.log" 2>&1
rc=$?
tail -4 "$EVW/build.log"
B=${KORCH_BUILD_DIR:-build-gpu}
row build $rc "$(since "$t0")" "version=$("$B/bin/korch" --version 2>&1 | head -1)"
pack
if ((rc != 0)); then echo "evidence: the build failed; nothing else can run"; python3 scripts/gpu/evidence_summary.py "$ROWS"; exit 1; fi
PY=$(grep -m1 '^Python3_EXECUTABLE' "$B/CMakeCache.txt" | cut -d= -f2)
export KORCH_CACHE_DIR=${KORCH_CACHE_DIR:-/var/tmp/korch-cache}
t0=$(date +%s.%N)
timeout 300 "$B/bin/korch" eval --task examples/tasks/1_ReLU_small.py --code tests/evaluator/corpus/good/triton_relu.py \
  --mode submit --device cuda --json --cache-dir "$KORCH_CACHE_DIR" >"$EVW/eval.json" 2>"$EVW/eval.err"
rc=$?
verdict=$("$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(r.get('status'), r.get('speedup'))" "$EVW/eval.json" 2>/dev/null)
echo "evidence: korch eval triton_relu (cuda): rc=$rc $verdict"
row eval $rc "$(since "$t0")" "verdict=$verdict"
pack

suite() {  # step cap args...: suite.sh with its $OUT in the work folder
  local step=$1 cap=$2; shift 2
  OUT=$EVW timeout -k 20 "$cap" bash scripts/gpu/suite.sh "$@" >"$EVW/$step.log" 2>&1
}

IFS=, read -r -a steps <<<"$STEPS"
for step in "${steps[@]}"; do
  echo "evidence: step $step at $(date -u +%T)"
  t0=$(date +%s.%N)
  case $step in
    ctest)
      mkdir -p "$EVW/corpus"
      KORCH_CORPUS_JOBS=${KORCH_CORPUS_JOBS:-7} KORCH_CORPUS_OUT=$EVW/corpus \
        suite ctest "${KORCH_EV_CTEST_S:-480}" ctest -L gpu
      rc=$?
      tail -12 "$EVW/ctest.log"
      summary=$(grep -E "tests passed|tests failed" "$EVW/ctest.log" | tail -1)
      waits=$("$PY" - "$EVW/corpus" <<'PYEOF'
import glob, json, sys
w = [r.get("stages", {}).get("host_lease_wait_s", 0) for f in glob.glob(sys.argv[1] + "/*.json")
     for r in json.load(open(f)) if isinstance(r, dict)]
print("%d evaluations, %d waited for the host lease, max %.1f s" % (len(w), sum(x > 0.01 for x in w), max(w or [0])))
PYEOF
)
      echo "evidence: ctest: $summary; lease waits: $waits"
      row ctest $rc "$(since "$t0")" "summary=$summary" "lease_waits=$waits" ;;
    large)
      suite large "${KORCH_EV_LARGE_S:-420}" large
      rc=$?
      tail -15 "$EVW/large.log"
      row large $rc "$(since "$t0")" "summary=$(tail -1 "$EVW/large.log")" ;;
    mix)
      KORCH_CAMPAIGN_TIMEOUT=${KORCH_EV_MIX_S:-360} suite mix "$(( ${KORCH_EV_MIX_S:-360} + 120 ))" mix evidence
      rc=$?
      tail -30 "$EVW/mix.log"
      m=$EVW/mix_evidence.json
      row mix $rc "$(since "$t0")" \
        "evaluations=$("$PY" -c "import json;print(json.load(open('$m'))['evaluations'])" 2>/dev/null)" \
        "per_gpu_hour=$("$PY" -c "import json;print(json.load(open('$m'))['per_gpu_hour_steady'])" 2>/dev/null)" \
        "lease_median_s=$("$PY" -c "import json;print(json.load(open('$m'))['lease_s']['median'])" 2>/dev/null)" \
        "verdicts=$("$PY" -c "import json;print(json.load(open('$m'))['verdicts'])" 2>/dev/null)" \
        "alarms=$(grep -h 'health-check alarms' "$EVW/mix.log" | tail -1)" ;;
    worker)
      KORCH_CAMPAIGN_TIMEOUT=${KORCH_EV_WORKER_S:-240} suite worker "$(( 2 * ${KORCH_EV_WORKER_S:-240} + 120 ))" worker
      rc=$?
      tail -25 "$EVW/worker.log"
      row worker $rc "$(since "$t0")" "summary=$(grep -h '^worker: [0-9]' "$EVW/worker.log" | tail -1)" ;;
    public)
      KORCH_CAMPAIGN_TIMEOUT=${KORCH_EV_PUBLIC_S:-420} KORCH_HARNESS_TIMEOUT=${KORCH_EV_PUBLIC_S:-420} \
        KORCH_HARNESS_JOBS=${KORCH_HARNESS_JOBS:-4} suite public "$(( ${KORCH_EV_PUBLIC_S:-420} + 180 ))" public
      rc=$?
      tail -40 "$EVW/public.log"
      row public $rc "$(since "$t0")" "summary=$(grep -h '^compare:' "$EVW/public.log" | tail -1)" \
        "alarms=$(grep -h 'health-check alarms' "$EVW/public.log" | tail -1)" ;;
    *)
      echo "evidence: unknown step $step"; row "$step" 2 0 ;;
  esac
  pack
done
python3 scripts/gpu/evidence_summary.py "$ROWS"
