"""Trusted Python half of korch-worker (DESIGN §5): the roles' entry points.

Runs inside the embedded interpreter of the sandboxed worker. Roles, each in
its own process (the C++ side forks, sandboxes, then calls one *_main):

  rules_main      AST rules (korch_rules.check) on the candidate; never imports it.
  compile_main    builds one statically resolved load_inline into the cache.
  reference_main  the judge (korch_judge.py): reference outputs, comparisons, timing.
  runner_main     a runner (korch_runner.py): the candidate's or the reference's
                  model, timed the same way on both sides.
  warm_main       Triton warm-up of a candidate (korch_runner.py).
  gpuinfo_main    facts about the GPU (name, SMs, L2, memory) for prompts and roofline.
  validate_main   reference-only checks of a task (korch tasks validate).

How tensors travel: korch_transport.py.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback

import torch

# torch.utils.cpp_extension is imported only in the jobs that use it, as root
# before their sandbox closes (korch_runner.prepare_main): on torch 2.x its
# import queries CUDA (registering torch's "bad fork" handler) and starts
# threads, so every child of a zygote that imported it would refuse to
# initialise CUDA, or deadlock.

try:  # imported in the zygote: every role then finds it in sys.modules
    import korch_rules  # noqa: F401  (trusted, from rules_python_dir())
except ImportError:
    korch_rules = None
try:  # the roofline's FLOP counter (evaluator/py), used by the GPU judge
    import korch_flops  # noqa: F401
except ImportError:
    korch_flops = None

import korch_protocol  # noqa: E402  (the schema: evaluator/protocol/protocol.json)
from korch_build import (versions, normalize_entry, cache_key, glue_probe_entry,  # noqa: E402,F401
                         GLUE_PROBE_SOURCE)
from korch_tasks import load_task, nbytes_of, as_outputs, task_inputs  # noqa: E402,F401
from korch_transport import write_result, tail  # noqa: E402,F401

EVAL_VERSION = korch_protocol.EVAL_VERSION


def _prewarm_counting():
    """The first use of a dispatch mode on torch 2.x imports torch._dynamo,
    sympy, fsdp and more: 6.9 s on the H200 (torch 2.11; cProfile in
    tools/bench/count_work_profile.py), in every judge that counted a task's
    work under its GPU lease (the roofline's work_counted phase: a median 4.9 s
    of a 13.7 s lease over the throughput mix), while the count itself takes
    3 ms. Done once here, on CPU tensors, every forked judge finds it done.
    Only with a CUDA build of torch (the GPU judge is the one that counts).
    Returns what the zygote's hello reports: the seconds it took, and whether
    it touched CUDA or started threads (either would make forked children
    unsafe: the GPU suites check both)."""
    if not torch.version.cuda or korch_flops is None or \
            os.environ.get("KORCH_ZYGOTE_PREWARM", "1") == "0":
        return {"done": False}
    t0 = time.monotonic()
    try:
        os.environ.setdefault("USER", "korch-judge")  # (getpass.getuser() in torch's caches)
        with torch.no_grad():
            korch_flops.count(torch.nn.Linear(4, 4), [torch.ones(2, 4)])
    except Exception as ex:  # noqa: BLE001 - the judge then pays it, as before
        return {"done": False, "error": str(ex)[:300]}
    return {"done": True, "s": round(time.monotonic() - t0, 3),
            "cuda_initialized": bool(torch.cuda.is_initialized()),
            "threads": len(os.listdir("/proc/self/task")),
            "cpp_extension_imported": "torch.utils.cpp_extension" in sys.modules}


_PREWARM = _prewarm_counting()


# ----------------------------------------------------------------------------- common

def _libcuda_dir():
    """Where libcuda.so.1 lives, so Triton need not exec ldconfig in a sandbox."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/lib64",
              "/usr/local/cuda/compat", "/lib/x86_64-linux-gnu"):
        if os.path.exists(os.path.join(d, "libcuda.so.1")):
            return d
    try:
        out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True,
                             timeout=30).stdout
        for line in out.splitlines():
            if "libcuda.so.1" in line and "=>" in line:
                return os.path.dirname(line.split("=>")[1].strip())
    except Exception:  # noqa: BLE001
        pass
    return ""


def zygote_hello(_arg):
    v = dict(versions())
    v["evaluator"] = EVAL_VERSION
    v["prewarm"] = _PREWARM
    # The work counter's own source: part of the key of the task's counted
    # work the daemon keeps (<cache>/work/), so a counter fix recounts.
    try:
        with open(korch_flops.__file__, "rb") as f:
            v["flops_counter"] = hashlib.sha256(f.read()).hexdigest()[:16]
    except Exception:  # noqa: BLE001
        v["flops_counter"] = "none"
    v["libcuda_dir"] = _libcuda_dir() if torch.version.cuda else ""
    try:
        import triton
        v["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        v["triton"] = "none"
    return json.dumps(v)


# ----------------------------------------------------------------------------- rules

def rules_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
    try:
        import korch_rules  # trusted, from rules_python_dir()
        res = korch_rules.check(job["code"], tolerance=job.get("tolerance", "strict"),
                                torch_ops=job.get("torch_ops", "allow"))
        entries = []
        for li in res.get("load_inline", []) or []:
            try:
                if li.get("name") is None or li.get("cpp_sources") is None:
                    raise ValueError("unresolved")
                e = normalize_entry(li.get("name"), li.get("cpp_sources"), li.get("cuda_sources"),
                                    li.get("functions"), li.get("extra_cflags"),
                                    li.get("extra_cuda_cflags"), li.get("extra_ldflags"),
                                    li.get("with_cuda"))
                entries.append({"entry": e, "key": cache_key(e), "lineno": li.get("lineno")})
            except Exception as ex:  # noqa: BLE001
                entries.append({"unresolved": str(ex), "lineno": li.get("lineno")})
        probe = glue_probe_entry()
        write_result(ctx, {
            "symbol_policy": korch_rules.symbol_policy(),
            "glue_probe": {"entry": probe, "key": cache_key(probe)},
            "ok": bool(res.get("ok")),
            "violations": res.get("violations", []),
            "load_inline": entries,
            "entry_points": res.get("entry_points", []),
            "language": res.get("language"),
            "rules_version": res.get("rules_version", ""),
        })
    except Exception:  # noqa: BLE001
        write_result(ctx, {"error": "rule checker failed", "detail": tail(traceback.format_exc())})


# ----------------------------------------------------------------------------- compile

def _symbol_violations(job, objs, so_path):
    """The symbol check of a built library: what its own objects import
    (`undefined`) and the violations under the current allowlist."""
    import korch_rules
    # The candidate's own objects say what its code calls. The final .so
    # can import more than that: where the toolchain links libstdc++
    # statically (the H200 image), std::cout alone pulls in fopen64/read/write
    # from libstdc++'s own code.
    syms = korch_rules.undefined_symbols_of_objects(objs) if objs else \
        korch_rules.undefined_symbols(so_path)
    viol = [] if job.get("probe") else korch_rules.check_symbols(
        syms, allow_extra=job.get("allow_extra", []))
    return sorted(set(syms)), viol


def _judge_symbols(result, job, build_dir, so_path):
    """Fills result's undefined, violations, ok and status from the build in
    build_dir (a compile's own folder, or a cached entry re-checked)."""
    try:
        result["undefined"], viol = _symbol_violations(job, _objects(build_dir), so_path)
    except Exception:  # noqa: BLE001
        viol = [{"rule": "symbols", "message": "symbol check failed: " +
                 tail(traceback.format_exc(), 500), "line": 0}]
    result["violations"] = viol
    result["ok"] = not viol
    result["status"] = "ok" if not viol else "rule_violation"


def _objects(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".o"))


def recheck_main(ctx, job):
    """A cached build's symbol verdict again, under the current allowlist
    (job["built"]: the cache entry, read only; its manifest: job["manifest"])."""
    built, old = job["built"], job["manifest"]
    result = dict(old, key=job["key"], symbol_policy=job.get("symbol_policy", ""), rechecked=True)
    _judge_symbols(result, job, built, os.path.join(built, old.get("so", "")))
    write_result(ctx, result)


def compile_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
    if job.get("recheck"):
        return recheck_main(ctx, job)
    import torch.utils.cpp_extension as cpp_ext
    entry = job["entry"]
    build_dir = job["build_dir"]
    captured = {}

    def no_import(module_name, path, is_python_module):
        # Never load the freshly built library in the compiler process: its
        # static initialisers are candidate code.
        captured["module"] = module_name
        captured["so"] = module_name + ".so"
        return None

    cpp_ext._import_module_from_library = no_import
    arch = versions()["arch"]
    if arch.startswith("sm_"):
        # nvcc builds for exactly the GPU the cache key names.
        os.environ["TORCH_CUDA_ARCH_LIST"] = "%s.%s" % (arch[3:-1], arch[-1])
    if os.path.isdir("/usr/local/cuda") and not os.environ.get("CUDA_HOME"):
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
    result = {"key": job["key"], "ok": False, "symbol_policy": job.get("symbol_policy", "")}
    t0 = time.monotonic()
    try:
        cpp_ext.load_inline(
            name=entry["name"], cpp_sources=entry["cpp_sources"],
            cuda_sources=entry["cuda_sources"] or None,
            functions=entry["functions"] or None,
            extra_cflags=entry["extra_cflags"] or None,
            extra_cuda_cflags=entry["extra_cuda_cflags"] or None,
            extra_ldflags=entry["extra_ldflags"] or None,
            build_directory=build_dir, verbose=False,
            with_cuda=entry["with_cuda"])
        so_path = os.path.join(build_dir, captured["so"])
        result.update({"module": captured["module"], "so": captured["so"]})
        _judge_symbols(result, job, build_dir, so_path)
    except Exception as ex:  # noqa: BLE001
        result["status"] = "compile_error"
        result["log"] = tail(str(ex), 8000)
    result["compile_s"] = time.monotonic() - t0
    manifest = dict(result)
    manifest.pop("protections", None)
    with open(os.path.join(build_dir, "korch-manifest.json"), "w") as f:
        json.dump(manifest, f)
    write_result(ctx, result)


# ----------------------------------------------------------------------------- validate

def rounding_noise(model, args, outs, rtol, room):
    """The reference's float32 outputs against the same reference in float64
    on the same inputs: where they differ by more than the tolerance's rtol
    (||out32 - out64|| / ||out64||), the output is decided by float32
    rounding -- a GroupNorm followed by a mean is ~3e-8 of noise around an
    exact 0 (L2/23) -- and an honest kernel, rounding differently, fails
    the comparison (issue #47). A flag's text, or None (also when the model
    does not run in float64 or the copy would not fit `room`)."""
    if not isinstance(model, torch.nn.Module) or nbytes_of(args) * 4 > room:
        return None
    pairs = [o for o in outs if isinstance(o, torch.Tensor) and o.dtype == torch.float32]
    if not pairs:
        return None
    try:
        import copy
        m64 = copy.deepcopy(model).double()
        a64 = [a.double() if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
               for a in args]
        o64 = as_outputs(m64(*a64))
    except Exception:  # noqa: BLE001 - an op without float64: no reading
        return None
    num = den = 0.0
    for o, r in zip(outs, o64):
        if isinstance(o, torch.Tensor) and o.dtype == torch.float32 and \
                isinstance(r, torch.Tensor) and r.shape == o.shape:
            num += float((o.double() - r).square().sum())
            den += float(r.double().square().sum())
    if num == 0.0:
        return None
    if den == 0.0:
        how = "it is nonzero (rms %.3g) where the same reference in float64 is exactly 0" % (
            (num / sum(o.numel() for o in pairs)) ** 0.5)
    else:
        rel = (num / den) ** 0.5
        if rel <= rtol:
            return None
        how = ("it differs from the same reference in float64 by %.3g relative "
               "(||out32 - out64|| / ||out64||, over the tolerance's rtol %.0e)" % (rel, rtol))
    return "rounding_noise: the output is float32 rounding noise: %s; a correct kernel that " \
           "rounds differently fails it" % how


def validate_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    issues = []
    res = {}
    dev = job.get("device", "cpu")
    try:
        task = load_task(job["task_source"])
        budget = int(job.get("memory_budget_mb", 4096)) << 20

        def build():
            torch.manual_seed(1)
            init = list(task.get_init_inputs())
            torch.manual_seed(2)
            m = task.Model(*init)
            return m.to(dev) if dev != "cpu" and isinstance(m, torch.nn.Module) else m

        def inputs(seed):
            return task_inputs(task, seed, dev)
        m1 = build()
        x1 = inputs(11)
        est = 2 * nbytes_of(x1)
        t0 = time.perf_counter()
        o1 = as_outputs(m1(*x1))
        if dev != "cpu":
            torch.cuda.synchronize()
            t0 = time.perf_counter()  # the first call paid the CUDA/cuDNN warm-up
            m1(*x1)
            torch.cuda.synchronize()
        res["ref_time_ms"] = (time.perf_counter() - t0) * 1e3
        est += 2 * nbytes_of(o1)
        res["estimated_bytes"] = est
        if est > budget:
            issues.append("over_budget: %.1f MB > %d MB" % (est / 2**20, budget >> 20))
        m2 = build()
        o1b = as_outputs(m2(*inputs(11)))
        if any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(o1, o1b)):
            issues.append("nondeterministic: the same seed gives different outputs")
        else:
            # The same inputs again (fresh copies, in case forward works in
            # place) with the generator moved on: a forward that draws random
            # numbers (dropout in training mode, torch.rand) gives another
            # output, and no candidate can match it.
            x1c = inputs(11)
            torch.rand(1)
            o1c = as_outputs(m1(*x1c))
            if any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(o1, o1c)):
                issues.append("nondeterministic: the same inputs give different outputs on a second call "
                              "(random numbers in forward?)")
        x2 = inputs(12)
        o2 = as_outputs(m1(*x2))
        if all(isinstance(a, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
               for a, b in zip(o1, o2)):
            issues.append("input_independent: different inputs give the same output")
        flat = torch.cat([o.detach().double().reshape(-1) for o in o1 if isinstance(o, torch.Tensor)])
        if flat.numel() > 1:
            spread = float(flat.max() - flat.min())
            scale = float(flat.abs().max())
            if spread <= 1e-6 * max(scale, 1e-30) or scale < 1e-6:
                issues.append("nearly_constant: the output is (nearly) constant "
                              "(spread %.3g, max |x| %.3g)" % (spread, scale))
        if not bool(torch.isfinite(flat).all()):
            issues.append("non_finite: the reference output has NaN/Inf")
        elif not any(i.startswith("nondeterministic") for i in issues):
            noise = rounding_noise(m1, inputs(11), o1, float(job.get("rtol", 1e-4)), budget - est)
            if noise:
                issues.append(noise)
    except (MemoryError, RuntimeError) as ex:
        if "alloc" in str(ex).lower() or "out of memory" in str(ex).lower() or \
                isinstance(ex, MemoryError):
            issues.append("over_budget: allocation failed: %s" % str(ex)[:200])
        else:
            issues.append("error: %s" % tail(traceback.format_exc(), 1500))
    except BaseException:  # noqa: BLE001
        issues.append("error: %s" % tail(traceback.format_exc(), 1500))
    res["issues"] = issues
    res["ok"] = not issues
    write_result(ctx, res)
    return ""


# ----------------------------------------------------------------------------- gpu facts

def gpuinfo_main(ctx_json):
    """Facts about the GPU this host evaluates on, from the device itself."""
    ctx = json.loads(ctx_json)
    res = {}
    try:
        p = torch.cuda.get_device_properties(0)
        res = {"ok": True, "name": p.name, "sms": p.multi_processor_count,
               "memory_bytes": p.total_memory, "l2_bytes": getattr(p, "L2_cache_size", 0),
               "capability": "%d.%d" % (p.major, p.minor), "count": torch.cuda.device_count(),
               "torch": torch.__version__, "cuda": torch.version.cuda}
        x = torch.ones(1 << 20, device="cuda")
        res["health"] = float(x.sum()) == float(1 << 20)
    except BaseException:  # noqa: BLE001
        res = {"ok": False, "error": tail(traceback.format_exc())}
    write_result(ctx, res)
    return ""


# The roles that live in their own files (neither imports this module).
from korch_judge import reference_main  # noqa: E402,F401
from korch_runner import runner_main, prepare_main, warm_main  # noqa: E402,F401
