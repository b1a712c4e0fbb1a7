#!/usr/bin/env python3
"""What a Triton candidate's first forward costs in a fresh process whose
Triton cache is already filled -- outside korch's sandbox, as a referee for
the judge's `runners_warm` phase (issue #35).

On the H200 (stop 34's mix) the judge's runners_warm phase, every timing
runner's first forward at once, took a median 2.0 s for a Triton candidate
against 0.5 s for a CUDA one, although the daemon's sandboxed warm-up job had
already compiled the same kernels into the candidate's cache. This script
asks whether that is Triton's own per-process cost or something korch's
sandbox adds:

  1. a warm-up process fills an empty TRITON_CACHE_DIR (two forwards);
  2. a fresh process, cache filled, times import, construction, the first
     and the second forward, and profiles the first (cProfile, top entries);
  3. --procs fresh processes do step 2 at the same time (no profile).

    python3 tools/bench/triton_first_call.py --task KB/level1/19_ReLU.py \\
        --code .mix-gen/candidates/L1_19_triton.py [--procs 8] [--json out.json]

Needs a CUDA build of torch and Triton (the GPU machine)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import cProfile, importlib.util, io, json, pstats, sys, time, types
t0 = time.perf_counter()
import torch
t_torch = time.perf_counter() - t0
task_path, code_path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
task = types.ModuleType("task")
exec(compile(open(task_path).read(), task_path, "exec"), task.__dict__)
t1 = time.perf_counter()
spec = importlib.util.spec_from_file_location("cand", code_path)
mod = importlib.util.module_from_spec(spec)
sys.modules["cand"] = mod
spec.loader.exec_module(mod)
torch.manual_seed(0)
model = mod.ModelNew(*task.get_init_inputs()).cuda()
with torch.device("cuda"):
    args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in task.get_inputs()]
torch.cuda.synchronize()
t_setup = time.perf_counter() - t1
res = {"torch_import_s": t_torch, "setup_s": t_setup}
prof = cProfile.Profile() if mode == "profile" else None
calls = []
for i in range(3 if mode == "warm" else 2):
    c0 = time.perf_counter()
    if prof is not None and i == 0:
        prof.enable()
    with torch.no_grad():
        model(*args)
    torch.cuda.synchronize()
    if prof is not None and i == 0:
        prof.disable()
    calls.append(time.perf_counter() - c0)
res["calls_s"] = calls
if prof is not None:
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30)
    res["profile"] = s.getvalue()[-6000:]
print(json.dumps(res))
'''


def run_child(py, args, env, mode):
    p = subprocess.run([py, "-c", CHILD, args.task, args.code, mode], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit("child (%s) failed:\n%s" % (mode, p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="triton-first-call.")
    env = dict(os.environ, TRITON_CACHE_DIR=cache, TRITON_HOME=cache, TRITON_CACHE_AUTOTUNING="1")
    out = {"task": a.task, "code": a.code}
    w0 = time.perf_counter()
    out["warm"] = run_child(a.python, a, env, "warm")
    out["warm"]["wall_s"] = time.perf_counter() - w0
    out["cache_files"] = sum(len(f) for _, _, f in os.walk(cache))
    out["cold_process"] = run_child(a.python, a, env, "profile")
    profile = out["cold_process"].pop("profile", "")
    p0 = time.perf_counter()
    procs = [subprocess.Popen([a.python, "-c", CHILD, a.task, a.code, "time"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(a.procs)]
    firsts = []
    for p in procs:
        o, e = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit("parallel child failed:\n" + e[-3000:])
        firsts.append(json.loads(o.strip().splitlines()[-1])["calls_s"][0])
    out["parallel"] = {"procs": a.procs, "wall_s": time.perf_counter() - p0,
                       "first_call_s": sorted(firsts)}
    out["cache_files_after"] = sum(len(f) for _, _, f in os.walk(cache))
    print(json.dumps(out, indent=1))
    print("--- cProfile of the first forward in a fresh process (cache filled) ---")
    print(profile)
    if a.json:
        json.dump(dict(out, profile=profile), open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
