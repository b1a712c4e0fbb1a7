#!/usr/bin/env python3
"""The reference and a candidate of one KernelBench task timed by Triton's own
`triton.testing.do_bench` (cold L2: it clears a 256 MB buffer before every
call; median of the repetitions), twice back to back, so korch-bench-eval can
print korch's medians next to it (issue #9: timing fidelity).

    do_bench.py --task TASK.py --code CANDIDATE.py [--rep-ms 200]

Prints one JSON object: ref_ms [run1, run2], cand_ms [run1, run2], and the
ratio ref/cand of each run. Runs trusted code only (a benchmark, not the
evaluator): the candidate is imported in this process and its load_inline
sources compile into this process's own extensions folder.
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--rep-ms", type=int, default=200)
    ap.add_argument("--warmup-ms", type=int, default=50)
    a = ap.parse_args()
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", tempfile.mkdtemp(prefix="korch-do-bench-"))
    import torch
    import triton.testing as tt

    task = load(a.task, "korch_do_bench_task")
    cand = load(a.code, "korch_do_bench_cand")
    torch.manual_seed(42)
    init = list(task.get_init_inputs())
    torch.manual_seed(42)
    ref = task.Model(*init).cuda()
    torch.manual_seed(42)
    new = cand.ModelNew(*init).cuda()
    torch.manual_seed(42)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    with torch.no_grad():
        out_r, out_c = ref(*inputs), new(*inputs)
        torch.cuda.synchronize()
        same = torch.allclose(out_r.float(), out_c.float(), atol=1e-2, rtol=1e-2) \
            if isinstance(out_r, torch.Tensor) else None

        def bench(model):
            return float(tt.do_bench(lambda: model(*inputs), warmup=a.warmup_ms, rep=a.rep_ms,
                                     return_mode="median"))

        res = {"ref_ms": [], "cand_ms": []}
        for _ in range(2):
            res["ref_ms"].append(bench(ref))
            res["cand_ms"].append(bench(new))
    res["speedup"] = [r / c for r, c in zip(res["ref_ms"], res["cand_ms"])]
    res["outputs_close"] = same
    res["triton"] = __import__("triton").__version__
    print(json.dumps(res))


if __name__ == "__main__":
    main()
