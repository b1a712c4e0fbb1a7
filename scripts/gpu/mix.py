#!/usr/bin/env python3
"""A realistic evaluation mix for throughput work (issue #35).

`make`: one correct candidate per KernelBench level-1/2 task (every --stride-th
task of each level, --per-level of each). The candidate is the task's own
`Model` renamed `ModelNew` (so the judge's work is that of the real task
sizes), its torch forward kept, and its output passed through one elementwise
stage of its own: a Triton copy kernel (even positions) or a CUDA copy kernel
through `load_inline` (odd positions). Each CUDA source names its task, so
every CUDA candidate is a distinct nvcc compile, as in a real campaign. Writes
DIR/candidates/*.py, DIR/manifest.json and DIR/replay.json (the replay
server's script: SUBMIT at once), the layout scripts/gpu/suite.sh's replay
campaigns read (`suite.sh mix`).

`report`: from a campaign database, what the GPU did: evaluations per
GPU-hour overall and in steady state, GPU busy fraction (the sum of the
evaluations' leases over the wall), the lease per evaluation by judge phase,
compile-pool occupancy, and the verdicts.

    python3 scripts/gpu/mix.py make --kernelbench ../shared/kernelbench --out .mix
    python3 scripts/gpu/mix.py report --db campaign.db --compile-slots 14 [--json out.json]
"""
import argparse
import ast
import json
import os
import re
import sqlite3
import statistics
import sys

from public_solutions import task_files  # (this folder: number -> task file of a level)

TRITON_STAGE = '''
import triton
import triton.language as tl


@triton.jit
def _stage_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def _stage(x):
    if isinstance(x, (tuple, list)):
        return tuple(_stage(t) for t in x)
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _stage_copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y
'''

CUDA_STAGE = '''
from torch.utils.cpp_extension import load_inline

_stage_cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// elementwise stage of the mix candidate for %(task)s
__global__ void stage_copy_kernel(const unsigned char* __restrict__ x,
                                  unsigned char* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    if (n %% 16 == 0) {
        const int4* xv = reinterpret_cast<const int4*>(x);
        int4* yv = reinterpret_cast<int4*>(y);
        for (long long k = i; k < n / 16; k += stride) yv[k] = xv[k];
    } else {
        for (long long k = i; k < n; k += stride) y[k] = x[k];
    }
}

torch::Tensor stage_copy(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "stage_copy: a CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = (long long)xc.numel() * xc.element_size();
    if (n == 0) return y;
    long long units = (n %% 16 == 0) ? n / 16 : n;
    int threads = 256;
    long long blocks = (units + threads - 1) / threads;
    if (blocks > 65535LL * 8) blocks = 65535LL * 8;
    stage_copy_kernel<<<(unsigned)blocks, threads>>>(
        reinterpret_cast<const unsigned char*>(xc.data_ptr()),
        reinterpret_cast<unsigned char*>(y.data_ptr()), n);
    return y;
}
"""

_stage_ext = load_inline(
    name="mix_stage_%(ident)s",
    cpp_sources="torch::Tensor stage_copy(torch::Tensor x);",
    cuda_sources=_stage_cuda_src,
    functions=["stage_copy"],
    verbose=False,
)


def _stage(x):
    if isinstance(x, (tuple, list)):
        return tuple(_stage(t) for t in x)
    return _stage_ext.stage_copy(x)
'''


def candidate(source, task_id, cuda):
    """The task's Model as ModelNew whose forward ends in an elementwise stage."""
    tree = ast.parse(source)
    kept = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            continue
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            node.name = "ModelNew"
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    item.name = "_torch_forward"
            node.body.append(ast.parse(
                "def forward(self, *args):\n    return _stage(self._torch_forward(*args))\n").body[0])
        kept.append(node)
    tree.body = kept
    body = ast.unparse(tree)
    # super(Model, self) inside the renamed class
    body = re.sub(r"\bsuper\(\s*Model\s*,", "super(ModelNew,", body)
    ident = re.sub(r"[^0-9A-Za-z]", "_", task_id)
    stage = (CUDA_STAGE % {"task": task_id, "ident": ident}) if cuda else TRITON_STAGE
    header = "import torch\nimport torch.nn as nn\n"
    return header + stage + "\n\n" + body + "\n"


def make(a):
    os.makedirs(os.path.join(a.out, "candidates"), exist_ok=True)
    manifest, replies = [], []
    for level in (1, 2):
        tasks = task_files(a.kernelbench, level)
        picked = sorted(tasks)[a.offset::a.stride][:a.per_level]
        for i, prob in enumerate(picked):
            path = tasks[prob]
            stem = os.path.basename(path)[:-3]
            task_id = "L%d/%s" % (level, stem)
            cuda = (i % 2 == 1)
            code = candidate(open(path).read(), task_id, cuda)
            name = "L%d_%d_%s.py" % (level, prob, "cuda" if cuda else "triton")
            with open(os.path.join(a.out, "candidates", name), "w") as f:
                f.write(code)
            manifest.append({"file": "candidates/" + name, "task": "level%d/%s.py" % (level, stem),
                             "task_id": task_id, "source": "mix:" + ("cuda" if cuda else "triton")})
            replies.append({"task": "Task %s." % task_id, "turn": 1,
                            "content": "Here is my kernel.\n\n```python\n%s```\n\nACTION: SUBMIT\n" % code})
    json.dump(manifest, open(os.path.join(a.out, "manifest.json"), "w"), indent=1)
    json.dump({"comment": "the throughput mix (scripts/gpu/mix.py make)",
               "replies": replies, "default": "I have no solution for this task."},
              open(os.path.join(a.out, "replay.json"), "w"), indent=1)
    # The campaign's task list: exactly the mix's tasks.
    ids = {1: [], 2: []}
    for e in manifest:
        ids[int(e["task_id"][1])].append(int(e["task_id"].split("/")[1].split("_")[0]))
    json.dump(ids, open(os.path.join(a.out, "ids.json"), "w"))
    print("mix: %d candidates (%d Triton, %d CUDA) in %s" % (
        len(manifest), sum(e["source"] == "mix:triton" for e in manifest),
        sum(e["source"] == "mix:cuda" for e in manifest), a.out))
    return 0


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def report(a):
    db = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True)
    rows = db.execute("SELECT e.task_id, v.verdict, v.report_json, v.created_at, v.finished_at "
                      "FROM evaluations v JOIN episodes e ON v.episode_id = e.id "
                      "WHERE v.state = 'done' ORDER BY v.finished_at").fetchall()
    if not rows:
        print("report: no finished evaluations in %s" % a.db)
        return 1
    start = db.execute("SELECT MIN(created_at) FROM evaluations").fetchone()[0]
    evs = []
    for task_id, verdict, rep, created, finished in rows:
        rep = json.loads(rep) if rep else {}
        ev = rep.get("evidence") or {}
        if isinstance(ev, str):
            try:
                ev = json.loads(ev)
            except ValueError:
                ev = {}
        # stages: {"lease_s": ...}; the judge's phases: [[name, seconds from its start], ...]
        stages = {k[:-2] if k.endswith("_s") else k: v for k, v in (ev.get("stages") or {}).items()}
        phases = dict(((ev.get("measure") or {}).get("phases")) or [])
        timing = (ev.get("measure") or {}).get("timing") or {}
        kind = "cuda" if ev.get("compile") else "triton"
        evs.append({"task": task_id, "verdict": verdict, "created": created, "finished": finished,
                    "stages": stages, "phases": phases, "kind": kind,
                    "timing_s": timing.get("timing_s"), "blocks": timing.get("blocks")})
    end = evs[-1]["finished"]
    wall = end - start
    leases = [e["stages"].get("lease", 0.0) for e in evs]
    n = len(evs)
    # Steady state: from the completion of the first tenth (the pipeline has
    # filled: compiles finished ahead of the GPU) to the last completion.
    k = max(1, n // 10)
    t_k = evs[k - 1]["finished"]
    steady_n = n - k
    steady_wall = end - t_k
    steady_lease = sum(leases[k:])
    out = {
        "evaluations": n,
        "wall_s": round(wall, 1),
        "fill_s": round(t_k - start, 1),
        "per_gpu_hour_overall": round(3600.0 * n / wall / a.gpus, 1) if wall > 0 else None,
        "per_gpu_hour_steady": round(3600.0 * steady_n / steady_wall / a.gpus, 1) if steady_wall > 0 else None,
        "gpu_busy_overall": round(sum(leases) / wall / a.gpus, 3) if wall > 0 else None,
        "gpu_busy_steady": round(steady_lease / steady_wall / a.gpus, 3) if steady_wall > 0 else None,
        "lease_s": {"median": pct(leases, 0.5), "p90": pct(leases, 0.9), "max": max(leases)},
        "verdicts": {},
    }
    for e in evs:
        out["verdicts"][e["verdict"]] = out["verdicts"].get(e["verdict"], 0) + 1
    # Lease by phase: the judge's phases are seconds from its start, cumulative.
    order = ["seed", "reference_ready", "work_counted", "runners_ready", "runners_warm", "trials",
             "families_ablation", "timing", "after_timing"]
    steps = {}
    for e in evs:
        prev = 0.0
        for p in order:
            if p in e["phases"]:
                steps.setdefault(p, []).append(e["phases"][p] - prev)
                prev = e["phases"][p]
        if e["phases"]:
            steps.setdefault("(lease less judge)", []).append(
                e["stages"].get("lease", 0.0) - prev)
    out["lease_by_phase_median_s"] = {p: round(statistics.median(v), 3) for p, v in steps.items()}
    for kind in ("triton", "cuda"):
        ks = [e for e in evs if e["kind"] == kind]
        if ks:
            out["lease_median_s_" + kind] = round(statistics.median(e["stages"].get("lease", 0.0) for e in ks), 3)
    t = [e["timing_s"] for e in evs if e["timing_s"] is not None]
    if t:
        out["timing_loop_median_s"] = round(statistics.median(t), 3)
        out["timing_blocks_median"] = statistics.median(e["blocks"] for e in evs if e["blocks"])
    for s in ("rules", "compile", "lease_wait", "host_lease_wait", "warm", "measure", "health"):
        v = [e["stages"][s] for e in evs if s in e["stages"]]
        if v:
            out.setdefault("stages_median_s", {})[s] = round(statistics.median(v), 3)
    compiles = [e["stages"].get("compile", 0.0) for e in evs]
    if a.compile_slots:
        out["compile_pool_occupancy"] = round(sum(compiles) / (a.compile_slots * wall), 3)
    out["compile_s"] = {"sum": round(sum(compiles), 1), "median": pct(compiles, 0.5)}
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)
    print(json.dumps(out, indent=1))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--kernelbench", required=True)
    m.add_argument("--out", default=".mix")
    m.add_argument("--stride", type=int, default=3)
    m.add_argument("--offset", type=int, default=0)
    m.add_argument("--per-level", type=int, default=30)
    r = sub.add_parser("report")
    r.add_argument("--db", required=True)
    r.add_argument("--gpus", type=int, default=1)
    r.add_argument("--compile-slots", type=int, default=0)
    r.add_argument("--json", default="")
    a = ap.parse_args()
    return make(a) if a.cmd == "make" else report(a)


if __name__ == "__main__":
    sys.exit(main())
