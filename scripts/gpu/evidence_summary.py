"""The summary table of scripts/gpu/evidence.sh: one row a step, from the
evidence.jsonl it wrote (each line: step, rc, seconds, and the step's figures).

  python3 scripts/gpu/evidence_summary.py OUT/evidence.jsonl
"""
import json
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        print("evidence: no step finished")
        return 1
    print("\n%-7s %4s %8s  %s" % ("step", "rc", "seconds", "figures"))
    for r in rows:
        figures = "; ".join("%s: %s" % (k, v) for k, v in r.items() if k not in ("step", "rc", "seconds"))
        print("%-7s %4d %8.1f  %s" % (r["step"], r["rc"], r["seconds"], figures))
    total = sum(r["seconds"] for r in rows)
    failed = [r["step"] for r in rows if r["rc"] != 0]
    print("%-7s %4s %8.1f  %s" % ("all", "", total, "failed: " + ", ".join(failed) if failed else "every step rc 0"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
