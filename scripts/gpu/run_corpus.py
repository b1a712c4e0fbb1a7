"""Runs a corpus manifest through `korch eval` and checks every verdict.

  python3 scripts/gpu/run_corpus.py --korch build-gpu/bin/korch \
      --manifest tests/evaluator/corpus/gpu/manifest.json \
      --kernelbench .gpu-deps/kernelbench --device cuda --out $OUT/corpus.json

Each entry: {"file", "task" (relative to the KernelBench folder), "expect"
("ok" or alternatives "a|b")}. Prints one line per entry and a summary;
exits 1 when any verdict differs from its expectation.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--korch", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--kernelbench", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mode", default="submit")
    ap.add_argument("--cache-dir", default="/var/tmp/korch-cache")
    ap.add_argument("--timeout", type=float, default=900, help="per korch eval process")
    ap.add_argument("--eval-timeout", type=float, default=120,
                    help="the evaluation's own wall-clock limit (korch eval --timeout)")
    ap.add_argument("--only", default="", help="substring filter on file names (comma-separated: any of them)")
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=1,
                    help="evaluations at once (compiles overlap; speedups then share the GPU)")
    a = ap.parse_args()
    base = os.path.dirname(os.path.abspath(a.manifest))
    entries = [e for e in json.load(open(a.manifest)) if not a.only or any(o in e["file"] for o in a.only.split(","))]
    results, lock = [], threading.Lock()

    def one(e):
        row = evaluate(a, base, e)
        with lock:
            results.append(row)
            sp = "%.3f" % row["speedup"] if isinstance(row["speedup"], (int, float)) else "-"
            print("%-4s %-40s %-45s expect %-28s got %-18s speedup %-7s %6.1fs %s" % (
                "OK" if row["match"] else "FAIL", e["file"], e["task"], e["expect"],
                row["status"], sp, row["wall_s"], row["error"][:120]), flush=True)
            if a.out:  # after every entry: a run cut short still leaves its results
                json.dump(results, open(a.out, "w"), indent=1)

    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        list(pool.map(one, entries))
    bad = sum(not r["match"] for r in results)
    # One GPU, one measurement, host-wide: how long evaluations waited for
    # another korch process's hold of the GPU (stages.host_lease_wait_s), and
    # how long they held it.
    st = [r["stages"] or {} for r in results]
    waits = [s.get("host_lease_wait_s", 0.0) for s in st]
    held = sorted(s.get("lease_s", 0.0) for s in st if s.get("lease_s"))
    print("lease: %d evaluations held a GPU (median %.1f s); %d waited for another process's "
          "hold, max %.1f s, total %.1f s" % (
              len(held), held[len(held) // 2] if held else 0.0,
              sum(w > 0.01 for w in waits), max(waits or [0]), sum(waits)))
    alarms = sum(r.get("gpu_health_after") == "failed" for r in results)
    print("corpus: %d entries, %d as expected, %d not; %d GPU health-check failures" % (
        len(results), len(results) - bad, bad, alarms))
    return 1 if bad else 0


def evaluate(a, base, e):
    task = os.path.join(a.kernelbench, e["task"])
    code = os.path.join(base, e["file"])
    t0 = time.monotonic()
    cmd = [a.korch, "eval", "--task", task, "--code", code, "--mode", a.mode,
           "--device", a.device, "--json", "--cache-dir", a.cache_dir,
           "--timeout", str(e.get("timeout_s", a.eval_timeout))]
    if e.get("memory_budget_mb"):
        cmd += ["--memory-budget-mb", str(e["memory_budget_mb"])]
    if os.environ.get("KORCH_GPUS"):
        cmd += ["--gpus", os.environ["KORCH_GPUS"]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        out = p.stdout.strip().splitlines()
        rep = json.loads(out[-1]) if out else {"status": "no_output", "error": p.stderr[-500:]}
    except subprocess.TimeoutExpired:
        rep = {"status": "harness_timeout"}
    except json.JSONDecodeError:
        rep = {"status": "bad_json", "error": (p.stdout + p.stderr)[-500:]}
    wall = time.monotonic() - t0
    expect = e["expect"].split("|")
    ok = rep.get("status") in expect
    ev = rep.get("evidence") or {}
    timing = (ev.get("measure") or {}).get("timing") or {}
    row = {"file": e["file"], "task": e["task"], "expect": e["expect"],
           "status": rep.get("status"), "match": ok, "speedup": rep.get("speedup"),
           "ci": [rep.get("speedup_ci_low"), rep.get("speedup_ci_high")],
           "ref_ms": rep.get("ref_time_ms"), "cand_ms": rep.get("cand_time_ms"),
           "t_min_ms": rep.get("t_min_ms"), "wall_s": round(wall, 2),
           "eval_wall_s": rep.get("wall_s"), "rule": rep.get("rule_id"),
           "overhead_us": timing.get("harness_overhead_us"),
           # why an interval is wide: each runner's median and their pooled spread
           "runners": [timing.get("reference_runners"), timing.get("candidate_runners")],
           "blocks": timing.get("blocks"),
           "process_spread": timing.get("process_spread"),
           "speedup_ci_bootstrap": timing.get("speedup_ci_bootstrap"),
           "stages": ev.get("stages"), "gpu_health_after": ev.get("gpu_health_after"),
           "families": (ev.get("measure") or {}).get("families"), "notes": rep.get("notes"),
           "error": (rep.get("error") or "")[:300],
           "detail": (rep.get("runtime_detail") or rep.get("compile_log") or "")[-1500:]}
    return row


if __name__ == "__main__":
    sys.exit(main())
