#!/usr/bin/env bash
# The "no behaviour change" check of a restructuring (issue #36): a snapshot
# of what the static rules say about every candidate this repo holds, as
# `korch lint --json` prints it, under both tolerances and both torch-ops
# settings. Take one before and one after; they must be byte-identical:
#   tools/house/snapshot.sh build/bin/korch > /tmp/before.jsonl
#   ... change ...
#   tools/house/snapshot.sh build/bin/korch > /tmp/after.jsonl && cmp /tmp/before.jsonl /tmp/after.jsonl
# Every file in tests/evaluator/corpus and tools/bench/candidates, sorted.
set -euo pipefail
cd "$(dirname "$0")/../.."
KORCH=${1:-build/bin/korch}
mapfile -t files < <(find tests/evaluator/corpus tools/bench/candidates -name '*.py' | LC_ALL=C sort)
for tol in strict tf32; do
  for ops in allow forbid; do
    for f in "${files[@]}"; do
      printf '%s %s %s\t' "$tol" "$ops" "$f"
      "$KORCH" lint "$f" --json --tolerance "$tol" --torch-ops "$ops" || true
    done
  done
done
