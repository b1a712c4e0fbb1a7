#!/usr/bin/env python3
"""What an equal-work candidate's speedup is without any harness (issue #7).

The equal-work candidate (tests/evaluator/corpus/equal_work/relu_at.py) calls
the reference's own ATen op, but through a load_inline (pybind11) function,
where the reference calls torch's generated binding. This program times the
two models in ONE process, no IPC, no regions, no judge, in the CPU
evaluator's own pattern (batches of calls that keep their outputs, input sets
in turn, blocks R C | C R alternating), and prints the ratio the harness should
reproduce. korch-bench-eval's speedup divided by this ratio is the harness's
own bias; the difference per call at 1x1 is the binding's cost.

    python3 tools/bench/equal_work_inprocess.py \
        --code tests/evaluator/corpus/equal_work/relu_at.py \
        --task examples/tasks/1_ReLU_small.py --task examples/tasks/5_ReLU_medium.py

(The candidate's load_inline compiles into torch's extension cache the first
time, ~30 s on a 2-core machine.) Run it on a quiet machine, next to
korch-bench-eval on the same tasks.
"""
import argparse
import importlib.util
import math
import statistics
import sys
import time

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EVICT = {"src": None, "dst": None}  # --lone: the copy before each lone call


def timed_block(model, sets, batch, calls):
    """ns per call over `calls` windows of `batch` calls (the first untimed),
    the way the runner times a batched block. --lone: `calls` lone calls,
    each after copying --evict-mb of memory (outside the window), the way the
    runner's calls of a slow model meet the cache its output copy left."""
    if EVICT["src"] is not None:
        total = 0
        for c in range(calls):
            EVICT["dst"].copy_(EVICT["src"])
            t0 = time.perf_counter_ns()
            out = model(*sets[c % len(sets)])
            total += time.perf_counter_ns() - t0
            del out
        return total / calls
    total, timed = 0, 0
    for _ in range(calls):
        results = [model(*sets[0])]
        t0 = time.perf_counter_ns()
        for i in range(1, batch):
            results.append(model(*sets[i % len(sets)]))
        total += time.perf_counter_ns() - t0
        timed += max(1, batch - 1)
        del results
    return total / timed


def measure(ref, cand, sets, blocks):
    with torch.no_grad():
        t_est = statistics.median(timed_block(ref, sets, 2, 3) for _ in range(5))
        window = 200e3  # the evaluator's timing_batch_us
        batch = int(min(64, math.ceil(window / t_est) + 1)) if t_est < window else 1
        calls = 5 if t_est * 5 < 20e6 else max(1, int(20e6 // t_est))
        if batch == 1 and EVICT["src"] is None:
            batch = 2  # (one untimed call, then one timed call per window)
        for _ in range(3):
            timed_block(ref, sets, batch, calls)
            timed_block(cand, sets, batch, calls)
        r, c = [], []
        for b in range(blocks):
            order = (ref, cand) if (b // 2 + b) % 2 == 0 else (cand, ref)
            for m in order:
                (r if m is ref else c).append(timed_block(m, sets, batch, calls))
    return statistics.median(r), statistics.median(c), batch, calls


def binding_cost(ref_fn, cand_fn, args, n=20000, reps=31):
    """Median ns per call of each function on tiny inputs (every size 1):
    the difference is the binding's own cost."""
    out = {"ref": [], "cand": []}
    with torch.no_grad():
        for rep in range(reps):
            for name, f in (("ref", ref_fn), ("cand", cand_fn))[:: 1 if rep % 2 else -1]:
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    f(*args)
                out[name].append((time.perf_counter_ns() - t0) / n)
    return statistics.median(out["ref"]), statistics.median(out["cand"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--code", required=True)
    ap.add_argument("--task", action="append", required=True)
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lone", action="store_true",
                    help="time lone calls, each after a copy of --evict-mb MB (the harness's regime "
                         "for models over 200 us)")
    ap.add_argument("--evict-mb", type=float, default=8)
    a = ap.parse_args()
    if a.lone:
        n = max(1, int(a.evict_mb * (1 << 20) / 4))
        EVICT["src"], EVICT["dst"] = torch.ones(n), torch.empty(n)
    torch.set_num_threads(a.threads)
    cand_mod = load(a.code, "korch_equal_work_candidate")
    print("torch %s, %d thread(s), %d blocks" % (torch.__version__, a.threads, a.blocks))
    for task in a.task:
        tm = load(task, "korch_equal_work_task")
        init = tm.get_init_inputs() if hasattr(tm, "get_init_inputs") else []
        torch.manual_seed(0)
        ref = tm.Model(*init)
        cand = cand_mod.ModelNew(*init)
        sets = [tm.get_inputs() for _ in range(4)]
        for rep in range(a.repeat):
            r, c, batch, calls = measure(ref, cand, sets, a.blocks)
            print("%s rep %d: ref %.2f us  cand %.2f us  in-process speedup %.3f  (batch %d, %d per block)"
                  % (task, rep, r / 1e3, c / 1e3, r / c, batch, calls))
    # The binding alone, on 1-element tensors: where the two paths differ.
    x = [torch.randn([1] * t.dim()) if isinstance(t, torch.Tensor) else t for t in sets[0]]
    fwd_ref = tm.Model(*init).forward
    fwd_cand = cand_mod.ModelNew(*init).forward
    br, bc = binding_cost(fwd_ref, fwd_cand, x)
    print("forward on 1 element: ref %.0f ns  cand %.0f ns  candidate's extra %.0f ns per call"
          % (br, bc, bc - br))
    return 0


if __name__ == "__main__":
    sys.exit(main())
