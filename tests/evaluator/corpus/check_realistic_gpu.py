"""Functional check of corpus/realistic/ on a GPU: each candidate against its KernelBench reference.

Not part of CTest (needs a GPU, nvcc, torch and triton). Usage, from this folder:

    KORCH_KERNELBENCH=/path/to/kernelbench python3 check_realistic_gpu.py all [NAME-FILTER...]

modes: build (compile the load_inline extensions in parallel), run, all. Writes
$OUT/gpucheck.json (or /tmp/gpucheck.json).

phase "build": import candidates in parallel subprocesses (compiles load_inline extensions).
phase "run": one process, sequential: same-seed init, same inputs, allclose at the file's tolerance.
"""
import concurrent.futures as cf
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "realistic"
TASKS = pathlib.Path(os.environ.get("KORCH_KERNELBENCH", HERE.parents[2].parent / "shared" / "kernelbench"))
EXT = pathlib.Path("/tmp/korch_ext")


def header(path, key):
    for line in path.read_text().splitlines()[:12]:
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return None


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def env_for(stem):
    e = dict(os.environ)
    e["TORCH_EXTENSIONS_DIR"] = str(EXT / stem)
    e["TORCH_CUDA_ARCH_LIST"] = "9.0"
    e["MAX_JOBS"] = "4"
    return e


def build_one(path):
    t0 = time.time()
    p = subprocess.run([sys.executable, __file__, "import", str(path)], env=env_for(path.stem),
                       capture_output=True, text=True, timeout=900)
    return path.name, p.returncode, time.time() - t0, (p.stdout + p.stderr)[-3000:]


def run_one(path, results):
    import torch
    stem = path.stem
    os.environ.update({k: v for k, v in env_for(stem).items() if k in ("TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")})
    task = header(path, "task")
    tol = header(path, "tolerance") or "strict"
    atol = rtol = 1e-4 if tol == "strict" else 1e-2
    torch.backends.cuda.matmul.allow_tf32 = tol != "strict"
    torch.backends.cudnn.allow_tf32 = tol != "strict"
    rec = {"file": path.name, "task": task, "tolerance": tol}
    t0 = time.time()
    try:
        ref_mod = load(TASKS / f"{task}.py", "ref_" + stem)
        cand = load(path, "cand_" + stem)
        init = ref_mod.get_init_inputs()
        torch.manual_seed(1234)
        ref = ref_mod.Model(*init).cuda()
        torch.manual_seed(1234)
        new = cand.ModelNew(*init).cuda()
        torch.manual_seed(7)
        with torch.device("cuda"):
            inputs = ref_mod.get_inputs()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]
        pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            r = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            o = new(*inputs)
            o2 = new(*inputs)
        torch.cuda.synchronize()
        rs = r if isinstance(r, (tuple, list)) else [r]
        os_ = o if isinstance(o, (tuple, list)) else [o]
        ok = len(rs) == len(os_)
        worst = 0.0
        for a, b in zip(rs, os_):
            if a.shape != b.shape or a.dtype != b.dtype:
                ok = False
                rec["why"] = f"shape/dtype {tuple(b.shape)} {b.dtype} vs {tuple(a.shape)} {a.dtype}"
                continue
            if not torch.allclose(b, a, atol=atol, rtol=rtol):
                ok = False
            d = (b.double() - a.double()).abs()
            worst = max(worst, float((d - rtol * a.double().abs()).max()))
            rec["max_abs"] = float(d.max())
        unchanged = all(torch.equal(x, y) for x, y in zip(inputs, pristine) if isinstance(x, torch.Tensor))
        o2s = o2 if isinstance(o2, (tuple, list)) else [o2]
        rec.update(ok=bool(ok and unchanged), inputs_unchanged=unchanged, excess=worst,
                   repeat_equal=all(torch.allclose(a, b, atol=atol, rtol=rtol) for a, b in zip(os_, o2s)))
        del ref, new, inputs, pristine, r, o, o2, rs, os_, o2s
    except Exception:
        rec.update(ok=False, error=traceback.format_exc()[-2500:])
    rec["s"] = round(time.time() - t0, 2)
    torch.cuda.empty_cache()
    results.append(rec)
    print(json.dumps(rec), flush=True)


def main():
    mode = sys.argv[1]
    out = pathlib.Path(os.environ.get("OUT", "/tmp"))
    files = sorted(CORPUS.glob("*.py"))
    if len(sys.argv) > 2 and mode != "import":
        files = [f for f in files if any(s in f.name for s in sys.argv[2:])]
    if mode == "import":
        import torch  # noqa: F401
        load(pathlib.Path(sys.argv[2]), "cand")
        return
    if mode in ("build", "all"):
        cuda = [f for f in files if "load_inline" in f.read_text()]
        t0 = time.time()
        with cf.ThreadPoolExecutor(max_workers=int(os.environ.get("BUILD_JOBS", "8"))) as ex:
            for name, rc, s, log in ex.map(build_one, cuda):
                print(f"build {name}: rc={rc} {s:.0f}s", flush=True)
                if rc:
                    print(log, flush=True)
        print(f"build total {time.time() - t0:.0f}s", flush=True)
    if mode in ("run", "all"):
        results = []
        for f in files:
            run_one(f, results)
        (out / "gpucheck.json").write_text(json.dumps(results, indent=1))
        bad = [r["file"] for r in results if not r.get("ok")]
        print(f"SUMMARY {len(results) - len(bad)}/{len(results)} ok; failing: {bad}", flush=True)


if __name__ == "__main__":
    main()
