#!/usr/bin/env bash
# The export half of the "no behaviour change" check of a restructuring
# (issue #36). Two steps, each run before and after the change:
#   tools/house/export_snapshot.sh run  DB [MODE]  # the demo campaign (examples/demo.toml,
#                                                  # replayed model replies) into DB; MODE mock|cpu
#   tools/house/export_snapshot.sh dump DB         # every export format and the json report of DB
#   tools/house/export_snapshot.sh timeless DB     # the jsonl export with its clock fields blanked
# `dump` of one fixed DB (made once, before the change) must be
# byte-identical before and after; so must `timeless` of two runs of the
# campaign, one by each build (what the clock decides -- when, how long --
# is all that may differ between runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${KORCH_BUILD_DIR:-build}
KORCH="$BUILD/bin/korch"
step=${1:?run|dump}
DB=${2:?database path}
case "$step" in
  run)
    MODE=${3:-mock}
    out=$(mktemp -d)
    trap 'kill $FAKE_PID 2>/dev/null || true; rm -rf "$out"' EXIT
    "$BUILD/tests/support/korch-fake-llm" --port 0 --script "replay:$PWD/examples/replay.json" \
      >"$out/replay.out" 2>"$out/replay.err" &
    FAKE_PID=$!
    for _ in $(seq 100); do grep -q '^PORT ' "$out/replay.out" 2>/dev/null && break; sleep 0.1; done
    PORT=$(awk '/^PORT /{print $2; exit}' "$out/replay.out")
    "$KORCH" run examples/demo.toml --no-progress --set "db_path=$DB" \
      --set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "models.replay.api_key_env=" \
      --set "evaluator.mode=$MODE" --set "evaluator.cache_dir=/var/tmp/korch-cache" >&2
    ;;
  dump)
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    for fmt in jsonl csv sft rl; do
      "$KORCH" export --db "$DB" --format "$fmt" --out "$out/export.$fmt" 2>"$out/export.$fmt.err"
    done
    for fmt in json text html; do
      "$KORCH" report --db "$DB" --format "$fmt" --out "$out/report.$fmt"
    done
    (cd "$out" && for f in $(LC_ALL=C ls); do echo "== $f"; cat "$f"; done)
    ;;
  timeless)
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    "$KORCH" export --db "$DB" --format jsonl --out "$out" 2>/dev/null
    python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    for k in ("at", "finished_at", "active_s", "llm_latency_s"):
        if k in r: r[k] = "-"
    print(json.dumps(r, sort_keys=True))' <"$out"
    ;;
  *) echo "usage: $0 run DB [mock|cpu] | dump DB | timeless DB" >&2; exit 2 ;;
esac
