#!/usr/bin/env python3
"""Where the judge's `work_counted` phase goes (issue #35).

For each task file: the reference and its first inputs on DEVICE (as the
judge builds them), then korch_flops.count() twice (the first pays imports
and dispatch-mode set-up, the second is the count itself), a plain forward for
comparison, and the count on the meta device (korch_flops.count_task(meta=
True): no GPU at all). With --profile, cProfile's top functions of the first
count.

    python3 tools/bench/count_work_profile.py [--device cuda] [--profile] TASK.py...
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "py"))


def sync(dev):
    import torch
    if dev == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("tasks", nargs="+")
    a = ap.parse_args()
    t0 = time.perf_counter()
    import torch
    t_torch = time.perf_counter() - t0
    t0 = time.perf_counter()
    import korch_flops
    t_import = time.perf_counter() - t0
    print("import torch %.2f s, korch_flops %.2f s, torch %s" % (t_torch, t_import, torch.__version__))
    os.environ.setdefault("USER", "korch-bench")
    for path in a.tasks:
        task = korch_flops.load_task(path)
        torch.manual_seed(0)
        model = task.Model(*task.get_init_inputs())
        inputs = task.get_inputs()
        if a.device != "cpu":
            model = model.to(a.device)
            inputs = [x.to(a.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            model(*inputs)
            sync(a.device)
            t0 = time.perf_counter()
            model(*inputs)
            sync(a.device)
            t_fwd = time.perf_counter() - t0
        prof = cProfile.Profile() if a.profile else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        w1 = korch_flops.count(model, inputs)
        sync(a.device)
        if prof:
            prof.disable()
        t1 = time.perf_counter() - t0
        t0 = time.perf_counter()
        w2 = korch_flops.count(model, inputs)
        sync(a.device)
        t2 = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            wm = korch_flops.count_task(path, meta=True, max_real_bytes=0)
            meta = "flops %.4g (%s)" % (wm["flops"], "meta" if wm.get("meta") else "real")
        except Exception as ex:  # noqa: BLE001
            meta = "failed: %s" % str(ex)[:120]
        tm = time.perf_counter() - t0
        print("%s: forward %.4f s; count 1st %.3f s, 2nd %.3f s (flops %.4g, dense %.4g, bytes %.4g); "
              "meta count %.3f s, %s" % (os.path.basename(path), t_fwd, t1, t2, w1["flops"],
                                          w1["flops_dense"], w1["bytes"], tm, meta))
        assert w1["flops"] == w2["flops"]
        if prof:
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(18)
            print("\n".join(s.getvalue().splitlines()[:40]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
