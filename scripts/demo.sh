#!/usr/bin/env bash
# The demo: installs what is missing, builds, and runs the bundled example
# campaign (examples/demo.toml) end to end, then prints its report.
#
# Model: the OpenAI-compatible endpoint in OPENAI_BASE_URL (with
# OPENAI_API_KEY, model OPENAI_MODEL, default gpt-4o-mini) when set;
# otherwise a bundled replay server answers with recorded model replies
# (examples/replay.json), and the demo says so.
# Evaluator: the real CPU evaluator when the worker built and torch imports,
# else the mock evaluator (fake verdicts, labelled as such everywhere).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
scripts/install-deps.sh
scripts/build.sh
BUILD=${KORCH_BUILD_DIR:-build}
KORCH="$ROOT/$BUILD/bin/korch"
RUN_DIR="$ROOT/$BUILD/demo"
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"

SETS=(--set "db_path=$RUN_DIR/demo.db")
FAKE_PID=""
cleanup() { [[ -n "$FAKE_PID" ]] && kill "$FAKE_PID" 2>/dev/null || true; }
trap cleanup EXIT

if [[ -n "${OPENAI_BASE_URL:-}" ]]; then
  echo "demo: using the OpenAI-compatible endpoint $OPENAI_BASE_URL (model ${OPENAI_MODEL:-gpt-4o-mini})"
  SETS+=(--set "models.replay.base_url=$OPENAI_BASE_URL" --set "models.replay.model=${OPENAI_MODEL:-gpt-4o-mini}")
else
  echo "demo: OPENAI_BASE_URL is not set, so NO live model is used: a bundled replay server answers"
  echo "demo: with recorded model replies (examples/replay.json). Set OPENAI_BASE_URL and OPENAI_API_KEY"
  echo "demo: to run the same campaign against a real model."
  "$ROOT/$BUILD/tests/support/korch-fake-llm" --port 0 --script "replay:$ROOT/examples/replay.json" \
    >"$RUN_DIR/replay.out" 2>"$RUN_DIR/replay.err" &
  FAKE_PID=$!
  for _ in $(seq 100); do grep -q '^PORT ' "$RUN_DIR/replay.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(awk '/^PORT /{print $2; exit}' "$RUN_DIR/replay.out")
  SETS+=(--set "models.replay.base_url=http://127.0.0.1:$PORT/v1" --set "models.replay.api_key_env=")
fi

MODE=mock
if [[ -x "$ROOT/$BUILD/evaluator/worker/korch-worker" ]] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  MODE=cpu
  SETS+=(--set "evaluator.cache_dir=/var/tmp/korch-cache")
  echo "demo: evaluator = cpu (real sandboxed pipeline; the first run compiles each C++ candidate, ~30 s each)"
else
  echo "demo: evaluator = mock (no worker or no torch here): verdicts and timings are FAKE"
fi
SETS+=(--set "evaluator.mode=$MODE")

"$KORCH" run "$ROOT/examples/demo.toml" "${SETS[@]}"
echo
"$KORCH" report "$ROOT/examples/demo.toml" "${SETS[@]}"
"$KORCH" export "$ROOT/examples/demo.toml" "${SETS[@]}" --format jsonl --out "$RUN_DIR/attempts.jsonl"
echo "demo: attempt log in $RUN_DIR/attempts.jsonl; database $RUN_DIR/demo.db"
