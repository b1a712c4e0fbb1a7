#!/usr/bin/env bash
# The Slurm examples on a real, one-node Slurm (docs/cluster.md): installs
# munge, slurmctld, slurmd and slurm-client from Debian if missing, starts
# them on this machine with a throwaway configuration, and runs a campaign
# whose evaluation workers are examples/slurm/korch-workers.sbatch as an
# `sbatch` job array, with a coordinator (`korch run`, evaluator.remote =
# true) on a throwaway PostgreSQL (scripts/pg-test-server.sh).
# Mid-run, one array task is `scancel`led while it holds an evaluation.
# Checks: the campaign finishes; its export equals an uninterrupted
# in-process run on SQLite; every evaluation went through the queue, none is
# left, each result was written once; the cancelled worker drained.
#
#   sudo bash scripts/slurm-test.sh [BUILD_DIR]      # default: build
#
# Opt-in (not part of scripts/test.sh): it installs packages and runs
# daemons as root. The workers run the mock evaluator with 1 s per
# evaluation; the GPUs are Slurm GRES backed by placeholder files (this
# machine has none), so `--gres=gpu:1` is scheduled for real but no GPU is
# used. Everything it starts is stopped at exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
KORCH=$BUILD/bin/korch
FAKE_LLM=$BUILD/tests/support/korch-fake-llm
[[ -x $KORCH && -x $FAKE_LLM ]] || { echo "slurm-test: build korch and korch-fake-llm first" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "slurm-test: run as root (it starts slurmctld, slurmd, munged)" >&2; exit 2; }

need=()
for p in munge slurmctld slurmd slurm-client; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  echo "slurm-test: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

D=$(mktemp -d /tmp/korch-slurm.XXXXXX)
chmod 755 "$D"
PIDS=()
DAEMONS=()  # slurmctld, slurmd: in the foreground of their own background jobs
cleanup() {
  set +e
  if [[ -n ${JOB:-} ]]; then
    SLURM_CONF=$D/slurm.conf scancel "$JOB" 2>/dev/null
    # The steps end (SIGTERM, then SIGKILL after KillWait) before slurmd goes.
    for _ in $(seq 30); do
      [[ -z $(SLURM_CONF=$D/slurm.conf squeue -h 2>/dev/null) ]] && break
      sleep 1
    done
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null; done
  [[ -s $D/munged.pid ]] && kill "$(cat "$D/munged.pid")" 2>/dev/null
  for p in "${DAEMONS[@]}"; do
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
  done
  bash "$ROOT/scripts/pg-test-server.sh" stop "$D/pg" >/dev/null 2>&1
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "slurm-test: FAIL: $*" >&2; for f in "$D"/*.log; do echo "== $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }

# --- munge: its own key, socket and pid file ---------------------------------
mkdir -p "$D/munge" "$D/munge-run"
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$D/munge" "$D/munge-run"
chmod 700 "$D/munge"; chmod 400 "$D/munge/munge.key"; chmod 755 "$D/munge-run"
MUNGE_SOCKET=$D/munge-run/munge.socket
runuser -u munge -- /usr/sbin/munged --key-file="$D/munge/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$D/munge-run/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/seed" \
  || fail "munged did not start"
cp "$D/munge-run/munged.pid" "$D/munged.pid" 2>/dev/null || true

# --- Slurm: one node, 2 placeholder GPUs --------------------------------------
HOST=$(hostname -s)
PORT_BASE=$((20000 + RANDOM % 20000))
mkdir -p "$D/state" "$D/spool" "$D/gpu"
touch "$D/gpu/gpu0" "$D/gpu/gpu1"
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
cat >"$D/slurm.conf" <<EOF
ClusterName=korchtest
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
SlurmctldPort=$PORT_BASE
SlurmdPort=$((PORT_BASE + 1))
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=10
GresTypes=gpu
NodeName=$HOST CPUs=8 RealMemory=$MEM_MB Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
cat >"$D/gres.conf" <<EOF
NodeName=$HOST Name=gpu File=$D/gpu/gpu[0-1]
EOF
export SLURM_CONF=$D/slurm.conf
/usr/sbin/slurmctld -D -i >>"$D/slurmctld.log" 2>&1 &
DAEMONS+=($!)
/usr/sbin/slurmd -D >>"$D/slurmd.log" 2>&1 &
DAEMONS+=($!)
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 1
done
sinfo -h -o %T | grep -qE '^(idle|mixed|allocated)' || fail "the node did not come up: $(sinfo 2>&1)"
echo "slurm-test: Slurm up ($(sinfo -h -o '%N %T %G'))"

# --- PostgreSQL, the fake LLM, the campaign -----------------------------------
URL=$(bash "$ROOT/scripts/pg-test-server.sh" start "$D/pg" $$ | tail -n 1)
[[ $URL == postgresql://* ]] || fail "no PostgreSQL: $URL"
"$FAKE_LLM" --port 0 --script kernel --latency-ms 0 >"$D/llm.out" 2>"$D/llm.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^PORT ' "$D/llm.out" 2>/dev/null && break; sleep 0.1; done
LLM_PORT=$(awk '/^PORT / {print $2; exit}' "$D/llm.out")
[[ -n $LLM_PORT ]] || fail "the fake LLM did not start"

campaign() { # STORE_LINE REMOTE
  cat <<EOF
name = "slurm-test"
samples_per_task = 4
max_turns = 3
log_level = "warn"
max_inflight_episodes = 16
$1
[tasks]
kernelbench_dir = "$ROOT/examples/tasks"
ids = "1-4"
[evaluator]
mode = "mock"
mock_latency_s = 1
remote = $2
[[models]]
id = "m1"
base_url = "http://127.0.0.1:$LLM_PORT/v1"
model = "fake-1"
concurrency = 16
EOF
}
campaign "db_path = \"$D/ref.db\"" false >"$D/ref.toml"
campaign "[store]
url = \"$URL\"" true >"$D/queue.toml"
chmod 644 "$D"/*.toml

echo "slurm-test: reference run (in-process, SQLite)"
"$KORCH" run "$D/ref.toml" --no-progress >"$D/ref.log" 2>&1 || fail "reference run"

echo "slurm-test: sbatch 3 workers"
JOB=$(sbatch --parsable --array=0-2 --gres=gpu:1 --cpus-per-task=1 --mem=512 --time=30 \
  --output="$D/worker-%A_%a.log" \
  --export=ALL,KORCH_STORE_URL="$URL",KORCH_BIN="$KORCH",KORCH_CONFIG="$D/queue.toml",KORCH_EVALUATOR=mock,KORCH_GPUS=none,KORCH_LEASE_S=5,KORCH_CACHE_DIR="$D/cache" \
  "$ROOT/examples/slurm/korch-workers.sbatch")
echo "slurm-test: job $JOB"
"$KORCH" run "$D/queue.toml" --no-progress >"$D/coordinator.log" 2>&1 &
COORD=$!
PIDS+=($COORD)

q() { psql -X -tA "$URL" -c "$1" 2>/dev/null; }
# Wait for array task 1 to hold an evaluation, then cancel it.
for _ in $(seq 600); do
  [[ $(q "SELECT count(*) FROM eval_queue WHERE state = 'claimed' AND worker_id LIKE '${JOB}_1@%'") == 1 ]] && break
  sleep 0.1
done
[[ $(q "SELECT count(*) FROM eval_queue WHERE state = 'claimed' AND worker_id LIKE '${JOB}_1@%'") == 1 ]] \
  || fail "array task 1 never claimed an evaluation"
HELD=$(q "SELECT request_id FROM eval_queue WHERE state = 'claimed' AND worker_id LIKE '${JOB}_1@%'")
echo "slurm-test: scancel ${JOB}_1 while it holds $HELD"
scancel "${JOB}_1"

wait "$COORD" || fail "the coordinator failed"
echo "slurm-test: campaign finished"

# --- checks -------------------------------------------------------------------
normalized() {
  "$KORCH" export "$1" --format jsonl | python3 -c '
import json, sys
drop = {"at", "llm_latency_s", "llm_http_attempts", "llm_sends", "dup_possible", "active_s", "finished_at"}
for line in sys.stdin:
    if line.strip():
        r = json.loads(line)
        print(json.dumps({k: v for k, v in r.items() if k not in drop}, sort_keys=True))'
}
normalized "$D/ref.toml" >"$D/ref.jsonl"
normalized "$D/queue.toml" >"$D/queue.jsonl"
cmp -s "$D/ref.jsonl" "$D/queue.jsonl" || fail "exports differ: $(diff "$D/ref.jsonl" "$D/queue.jsonl" | head -5)"
EVALS=$(q "SELECT count(*) FROM evaluations")
[[ $(q "SELECT count(*) FROM eval_queue") == "$EVALS" ]] || fail "not every evaluation went through the queue"
[[ $(q "SELECT count(*) FROM eval_queue WHERE state <> 'done'") == 0 ]] || fail "evaluations left in the queue"
[[ $(q "SELECT SUM(evaluations_done) FROM workers") == "$EVALS" ]] || fail "a result was written twice or not at all"
[[ $(q "SELECT state FROM eval_queue WHERE request_id = '$HELD'") == done ]] || fail "the held evaluation is not done"
CANCELLED=$(q "SELECT state || ' ' || evaluations_done FROM workers WHERE id LIKE '${JOB}_1@%'")
echo "slurm-test: cancelled worker: $CANCELLED; $EVALS evaluations; $(q "SELECT count(*) FROM eval_queue WHERE claims > 1") re-claimed"
[[ $CANCELLED == stopped* ]] || fail "the cancelled worker did not drain (row: $CANCELLED)"
"$KORCH" status --db "$URL"
echo "slurm-test: PASS"
