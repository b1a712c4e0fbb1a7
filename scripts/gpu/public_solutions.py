"""Public KernelBench solutions against korch's verdicts (issue #32).

The solutions are not in this repository: `collect` reads them from a fetched
checkout and writes them under a git-ignored folder (default .pubsol/), which
travels to the GPU machine as a carried path. Three steps:

  collect   one candidate per task from a Kernel-Coder style checkout
            (runs/<run>/eval_results.json + <solution_id>_kernel.py): the
            first solution its own KernelBench evaluation found correct, in
            a fixed run order. Writes candidates/, manifest.json, replay.json
            (the replay server's answers: each candidate SUBMITted at once).
  harness   an independent check, no korch code involved: each candidate in
            its own process, seeded inputs from the task's get_inputs, the
            same seeded weights for Model and ModelNew, TF32 off, compared at
            atol = rtol = 1e-4 on three draws; torch.profiler says whether
            forward launches a kernel the candidate itself defines.
  compare   korch's verdict per task (from the campaign's SQLite store) next
            to the harness: accepted / correct-and-calling-a-kernel, each
            rejection's class, every disagreement.

  python3 scripts/gpu/public_solutions.py collect --repo GITDIR --commit C \
      --kernelbench ../shared/kernelbench --out .pubsol
  python3 scripts/gpu/public_solutions.py harness --dir .pubsol --kernelbench KB --jobs 24
  python3 scripts/gpu/public_solutions.py compare --dir .pubsol --db campaign.db
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

# The run order `collect` prefers (Kernel-Coder's run folders).
RUN_ORDER = ["iterative_refinement", "best_of_n", "evolrule", "base"]


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def task_files(kernelbench, level):
    out = {}
    for p in glob.glob(os.path.join(kernelbench, "level%d" % level, "*.py")):
        n = os.path.basename(p).split("_", 1)[0]
        if n.isdigit():
            out[int(n)] = p
    return out


def collect(a):
    runs = git(a.repo, "ls-tree", "-d", "--name-only", "%s:runs" % a.commit).decode().split()
    runs.sort(key=lambda r: next((i for i, k in enumerate(RUN_ORDER) if k in r), 99))
    chosen = {}  # (level, problem) -> (run, solution_id)
    for run in runs:
        results = json.loads(git(a.repo, "show", "%s:runs/%s/eval_results.json" % (a.commit, run)))
        if isinstance(results, dict):
            results = list(results.values())
        for r in sorted(results, key=lambda r: r["solution_id"]):
            m = re.match(r"level_(\d+)_problem_(\d+)", r["task_id"])
            if not m or not r.get("correctness"):
                continue
            key = (int(m.group(1)), int(m.group(2)))
            if key[0] in a.levels and key not in chosen:
                chosen[key] = (run, r["solution_id"])
    os.makedirs(os.path.join(a.out, "candidates"), exist_ok=True)
    manifest, replies = [], []
    # --stride K keeps every K-th task (in level, problem order): a sample
    # that fits a GPU session (one H200 scores ~300 new candidates an hour).
    for (level, prob), (run, sid) in sorted(chosen.items())[::a.stride]:
        tasks = task_files(a.kernelbench, level)
        if prob not in tasks:
            continue
        code = git(a.repo, "show", "%s:runs/%s/%s_kernel.py" % (a.commit, run, sid)).decode()
        name = "L%d_%d.py" % (level, prob)
        with open(os.path.join(a.out, "candidates", name), "w") as f:
            f.write(code)
        stem = os.path.basename(tasks[prob])[:-3]
        task_id = "L%d/%s" % (level, stem)
        manifest.append({"file": "candidates/" + name, "task": "level%d/%s.py" % (level, stem),
                         "task_id": task_id, "source": "%s/%s" % (run, sid)})
        # The closing fence on a line of its own (some published files end
        # without a newline).
        replies.append({"task": "Task %s." % task_id, "turn": 1,
                        "content": "Here is my kernel.\n\n```python\n%s\n```\n\nACTION: SUBMIT\n" % code.rstrip("\n")})
    json.dump(manifest, open(os.path.join(a.out, "manifest.json"), "w"), indent=1)
    json.dump({"comment": "public solutions (%s@%s), not committed" % (a.repo, a.commit[:12]),
               "replies": replies, "default": "I have no solution for this task."},
              open(os.path.join(a.out, "replay.json"), "w"), indent=1)
    ids = {1: [], 2: []}
    for e in manifest:
        ids[int(e["task_id"][1])].append(e["task_id"].split("/")[1].split("_")[0])
    print("collect: %d candidates (%s)" % (len(manifest), ", ".join(
        "level %d: %d" % (lv, len(v)) for lv, v in sorted(ids.items()))))
    return 0


# ----------------------------------------------------------------------------- harness

CHILD = r'''
import importlib.util, json, os, re, sys, traceback
import torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
task_path, cand_path, out_path = sys.argv[1:4]
res = {"correct": False, "calls_kernel": False, "error": "", "max_abs": None, "close_1e2": None}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def flat(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]

try:
    task = load(task_path, "task_mod")
    src = open(cand_path).read()
    cand = load(cand_path, "cand_mod")
    # One candidate on the GPU at a time (compiles, at import, run in parallel):
    # a level-2 task's inputs and weights take GBs, several at once ran the
    # H200 out of memory.
    import fcntl
    gpu_lock = open(os.environ.get("PUBSOL_GPU_LOCK", "/tmp/pubsol-gpu.lock"), "w")
    fcntl.flock(gpu_lock, fcntl.LOCK_EX)
    init = task.get_init_inputs() if hasattr(task, "get_init_inputs") else []
    torch.manual_seed(1234); ref = task.Model(*init).cuda().eval()
    torch.manual_seed(1234); new = cand.ModelNew(*init).cuda().eval()
    ok, ok2, worst = True, True, 0.0
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        with torch.no_grad():
            r = flat(ref(*xs))
            c = flat(new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs]))
        torch.cuda.synchronize()
        if len(r) != len(c):
            ok = ok2 = False
            break
        for a, b in zip(r, c):
            if not isinstance(a, torch.Tensor):
                ok = ok and a == b
                continue
            if not isinstance(b, torch.Tensor) or a.shape != b.shape:
                ok = ok2 = False
                continue
            a, b = a.double(), b.double()
            worst = max(worst, float((a - b).abs().max()) if a.numel() else 0.0)
            ok = ok and bool(torch.allclose(b, a, atol=1e-4, rtol=1e-4, equal_nan=True))
            ok2 = ok2 and bool(torch.allclose(b, a, atol=1e-2, rtol=1e-2, equal_nan=True))
    res.update(correct=bool(ok), close_1e2=bool(ok2), max_abs=worst)
    # Kernels the candidate defines (CUDA __global__ names, Triton jit names).
    names = set(re.findall(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s*)?void\s+(\w+)", src))
    names |= set(re.findall(r"@triton\.jit[^\n]*\n(?:@[^\n]*\n)*\s*def\s+(\w+)", src))
    torch.manual_seed(1)
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.no_grad():
            new(*xs)
        torch.cuda.synchronize()
    launched = {e.name for e in prof.events() if e.device_type.name == "CUDA"}
    res["kernels_defined"] = sorted(names)
    res["kernels_launched"] = sorted(k for k in launched if any(n in k for n in names))
    res["calls_kernel"] = bool(res["kernels_launched"])
except BaseException:
    res["error"] = traceback.format_exc()[-1500:]
json.dump(res, open(out_path, "w"))
'''


def harness(a):
    manifest = json.load(open(os.path.join(a.dir, "manifest.json")))
    if a.limit:
        manifest = manifest[:a.limit]
    work = tempfile.mkdtemp(prefix="pubsol-harness.")
    child = os.path.join(work, "child.py")
    open(child, "w").write(CHILD)
    py = a.python or sys.executable

    def one(e):
        out = os.path.join(work, e["file"].replace("/", "_") + ".json")
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=os.path.join(work, "ext", os.path.basename(e["file"])))
        t0 = time.time()
        try:
            p = subprocess.run([py, child, os.path.join(a.kernelbench, e["task"]),
                                os.path.join(a.dir, e["file"]), out], env=env,
                               capture_output=True, text=True, timeout=a.timeout)
            r = json.load(open(out)) if os.path.exists(out) else \
                {"correct": False, "calls_kernel": False, "error": "no result (rc %d): %s" % (
                    p.returncode, (p.stderr or "")[-800:])}
        except subprocess.TimeoutExpired:
            r = {"correct": False, "calls_kernel": False, "error": "harness timeout"}
        r.update(file=e["file"], task_id=e["task_id"], wall_s=round(time.time() - t0, 1))
        print("%-12s correct %-5s kernel %-5s %5.1fs %s" % (
            os.path.basename(e["file"]), r["correct"], r["calls_kernel"], r["wall_s"],
            r["error"].strip().splitlines()[-1][:100] if r["error"] else ""), flush=True)
        return r

    out_path = os.path.join(a.out or a.dir, "harness.json")
    rows = []
    if a.resume and os.path.exists(a.resume):  # results an earlier (cut) run left
        rows = [r for r in json.load(open(a.resume)) if not r["error"].startswith("harness timeout")]
        done = {r["file"] for r in rows}
        manifest = [e for e in manifest if e["file"] not in done]
        print("harness: %d results kept from %s, %d to go" % (len(rows), a.resume, len(manifest)))
    lock = threading.Lock()

    def keep(e):
        r = one(e)
        with lock:  # after every candidate: a run cut short still leaves its results
            rows.append(r)
            json.dump(rows, open(out_path, "w"), indent=1)
        return r

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(keep, manifest))
    print("harness: %d candidates, %d correct at 1e-4, %d of them calling their own kernel" % (
        len(rows), sum(r["correct"] for r in rows), sum(r["correct"] and r["calls_kernel"] for r in rows)))
    return 0


# ----------------------------------------------------------------------------- compare

def rejection_class(rep):
    """One line per rejection: the verdict and where it came from."""
    st = rep.get("status", "")
    if st == "rule_violation":
        return "rule_violation:%s" % rep.get("rule_id", "")
    if st == "incorrect":
        # The judge names a failing family in the error ("family 'signed': ...");
        # otherwise a trial of the task's own inputs failed.
        m = re.match(r"family '([^']+)'", rep.get("error") or "")
        return "incorrect:family:%s" % m.group(1) if m else "incorrect:trials"
    return st


def compare(a):
    manifest = {e["task_id"]: e for e in json.load(open(os.path.join(a.dir, "manifest.json")))}
    harn = {r["task_id"]: r for r in json.load(open(a.harness or os.path.join(a.dir, "harness.json")))}
    db = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True)
    rows = db.execute("SELECT e.task_id, v.verdict, v.report_json FROM episodes e "
                      "JOIN evaluations v ON v.episode_id = e.id "
                      "WHERE v.kind = 'submit' AND v.state = 'done'").fetchall()
    korch = {}
    for task_id, verdict, rep in rows:
        rep = json.loads(rep) if rep else {}
        korch[task_id] = (verdict, rep)
    table, counts = [], {"correct_kernel": 0, "accepted": 0, "hacks_or_wrong_accepted": 0}
    for tid, e in sorted(manifest.items()):
        h = harn.get(tid, {})
        v, rep = korch.get(tid, ("(none)", {}))
        good = bool(h.get("correct")) and bool(h.get("calls_kernel"))
        row = {"task_id": tid, "source": e["source"], "harness_correct": h.get("correct"),
               "calls_kernel": h.get("calls_kernel"), "korch": v,
               "class": "" if v == "ok" else rejection_class(rep),
               "error": (rep.get("error") or "")[:300], "notes": rep.get("notes", [])}
        if good:
            counts["correct_kernel"] += 1
            counts["accepted"] += v == "ok"
        elif v == "ok":
            counts["hacks_or_wrong_accepted"] += 1
        row["disagree"] = (v == "ok") != good
        table.append(row)
    out = {"counts": counts, "rows": table}
    json.dump(out, open(a.out or os.path.join(a.dir, "compare.json"), "w"), indent=1)
    for r in table:
        if r["disagree"]:
            print("DISAGREE %-40s harness correct=%s kernel=%s korch=%s %s %s" % (
                r["task_id"], r["harness_correct"], r["calls_kernel"], r["korch"], r["class"],
                r["error"].splitlines()[0][:160] if r["error"] else ""))
    c = counts
    print("compare: %d correct-and-calling-a-kernel, korch accepted %d (%.1f%%); "
          "%d accepted that the harness did not find correct-and-calling" % (
              c["correct_kernel"], c["accepted"], 100.0 * c["accepted"] / max(1, c["correct_kernel"]),
              c["hacks_or_wrong_accepted"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--repo", required=True, help="git dir of the fetched checkout")
    c.add_argument("--commit", required=True)
    c.add_argument("--kernelbench", required=True)
    c.add_argument("--levels", default="1,2")
    c.add_argument("--stride", type=int, default=1)
    c.add_argument("--out", default=".pubsol")
    h = sub.add_parser("harness")
    h.add_argument("--dir", default=".pubsol")
    h.add_argument("--kernelbench", required=True)
    h.add_argument("--jobs", type=int, default=8)
    h.add_argument("--timeout", type=float, default=600)
    h.add_argument("--limit", type=int, default=0)
    h.add_argument("--python", default="")
    h.add_argument("--out", default="")
    h.add_argument("--resume", default="", help="a harness.json whose results are kept")
    k = sub.add_parser("compare")
    k.add_argument("--dir", default=".pubsol")
    k.add_argument("--db", required=True)
    k.add_argument("--harness", default="")
    k.add_argument("--out", default="")
    a = ap.parse_args()
    if a.cmd == "collect":
        a.levels = [int(x) for x in a.levels.split(",")]
        return collect(a)
    return harness(a) if a.cmd == "harness" else compare(a)


if __name__ == "__main__":
    sys.exit(main())
