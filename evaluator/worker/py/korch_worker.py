"""Trusted Python half of korch-worker (DESIGN §5).

Runs inside the embedded interpreter of the sandboxed worker. Roles, each in
its own process (the C++ side forks, sandboxes, then calls one *_main):

  rules_main      AST rules (korch_rules.check) on the candidate; never imports it.
  compile_main    builds one statically resolved load_inline into the cache.
  reference_main  the judge: reference Model, inputs, comparisons, timing.
  candidate_main  the only code path that imports the candidate.
  validate_main   reference-only checks of a task (korch tasks validate).

Judge <-> candidate protocol: one JSON object per SOCK_SEQPACKET datagram,
tensors travel in a fresh memfd per call (SCM_RIGHTS). The candidate never
receives seeds, other calls' inputs or the judge's memory; the judge copies
the candidate's output out of the candidate's memfd as soon as it arrives.
"""
import hashlib
import importlib.machinery
import importlib.util
import json
import math
import mmap
import os
import random
import socket
import subprocess
import sys
import time
import traceback
import types

import torch
import torch.utils.cpp_extension as cpp_ext

try:  # imported in the zygote: every role then finds it in sys.modules
    import korch_rules  # noqa: F401  (trusted, from rules_python_dir())
except ImportError:
    korch_rules = None

EVAL_VERSION = "korch-eval-cpu/0.1"
TOLERANCES = {"strict": (1e-4, 1e-4), "tf32": (1e-2, 1e-2)}
LOW_PRECISION_TOL = 1e-2
ALIGN = 64
MAX_MSG = 16 << 20
_VERSIONS = None


# ----------------------------------------------------------------------------- common

def versions():
    """Everything a built library depends on; part of every cache key."""
    global _VERSIONS
    if _VERSIONS is None:
        try:
            cc = subprocess.run(["c++", "--version"], capture_output=True, text=True,
                                timeout=30).stdout.splitlines()[0]
        except Exception:  # noqa: BLE001
            cc = "unknown"
        _VERSIONS = {
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "compiler": cc,
            "arch": "cpu",
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        }
    return _VERSIONS


def zygote_hello(_arg):
    v = dict(versions())
    v["evaluator"] = EVAL_VERSION
    return json.dumps(v)


def _as_list(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


def normalize_entry(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, with_cuda=None):
    if isinstance(functions, dict):
        # Docstrings do not change the code; the rules report names only.
        fns = [str(k) for k in functions]
    else:
        fns = _as_list(functions)
    return {
        "name": name,
        "cpp_sources": _as_list(cpp_sources),
        "cuda_sources": _as_list(cuda_sources),
        "functions": fns,
        "extra_cflags": _as_list(extra_cflags),
        "extra_cuda_cflags": _as_list(extra_cuda_cflags),
        "extra_ldflags": _as_list(extra_ldflags),
        "with_cuda": bool(with_cuda) if with_cuda is not None else bool(_as_list(cuda_sources)),
    }


# The binding glue load_inline generates (pybind11, libpython, torch_python)
# imports symbols a candidate's own code may not. The symbol check allows
# exactly what this probe's glue imports, for the usual argument types.
GLUE_PROBE_SOURCE = r"""
#include <torch/extension.h>
#include <tuple>
#include <vector>
torch::Tensor korch_probe_t(torch::Tensor x) {
  TORCH_CHECK(x.dim() >= 0, "probe ", x.dim());
  return x;
}
torch::Tensor korch_probe_s(torch::Tensor x, int64_t a, double b, bool c, int d, float e) { return x; }
std::vector<torch::Tensor> korch_probe_v(std::vector<torch::Tensor> xs) { return xs; }
void korch_probe_void(torch::Tensor x) {}
int64_t korch_probe_i(int64_t a) { return a; }
double korch_probe_d(double a) { return a; }
std::tuple<torch::Tensor, torch::Tensor> korch_probe_tuple(torch::Tensor x, c10::optional<torch::Tensor> y) {
  return std::make_tuple(x, x);
}
"""


def glue_probe_entry():
    return normalize_entry("korch_glue_probe", [GLUE_PROBE_SOURCE], None,
                           ["korch_probe_t", "korch_probe_s", "korch_probe_v", "korch_probe_void",
                            "korch_probe_i", "korch_probe_d", "korch_probe_tuple"],
                           ["-O3"], None, None, False)


def cache_key(entry):
    payload = {"entry": entry, "versions": versions(), "format": 1}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _write_result(ctx, result):
    result.setdefault("protections", ctx.get("protections", []))
    data = json.dumps(result).encode()
    fd = ctx["result_fd"]
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.close(fd)


def _tail(text, n=4000):
    text = text or ""
    return text[-n:]


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
        _write_result(ctx, {
            "glue_probe": {"entry": probe, "key": cache_key(probe)},
            "ok": bool(res.get("ok")),
            "violations": res.get("violations", []),
            "load_inline": entries,
            "entry_points": res.get("entry_points", []),
            "language": res.get("language"),
        })
    except Exception:  # noqa: BLE001
        _write_result(ctx, {"error": "rule checker failed", "detail": _tail(traceback.format_exc())})


# ----------------------------------------------------------------------------- compile

def compile_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
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
    result = {"key": job["key"], "ok": False}
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
        try:
            import korch_rules
            syms = korch_rules.undefined_symbols(so_path)
            result["undefined"] = sorted(set(syms))
            viol = [] if job.get("probe") else korch_rules.check_symbols(
                syms, allow_extra=job.get("allow_extra", []))
        except Exception:  # noqa: BLE001
            viol = [{"rule": "symbols", "message": "symbol check failed: " +
                     _tail(traceback.format_exc(), 500), "line": 0}]
        result["violations"] = viol
        result["ok"] = not viol
        result["status"] = "ok" if not viol else "rule_violation"
    except Exception as ex:  # noqa: BLE001
        result["status"] = "compile_error"
        result["log"] = _tail(str(ex), 8000)
    result["compile_s"] = time.monotonic() - t0
    manifest = dict(result)
    manifest.pop("protections", None)
    with open(os.path.join(build_dir, "korch-manifest.json"), "w") as f:
        json.dump(manifest, f)
    _write_result(ctx, result)


# ----------------------------------------------------------------------------- transport

def _dtype_name(dt):
    return str(dt).replace("torch.", "")


_DTYPES = {n: getattr(torch, n) for n in (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
    "bool", "complex64", "complex128")}


def pack(values):
    """Packs a list of tensors / JSON scalars into (header, memfd)."""
    header, total = [], 0
    for v in values:
        if isinstance(v, torch.Tensor):
            nbytes = v.numel() * v.element_size()
            header.append({"t": "tensor", "dtype": _dtype_name(v.dtype), "shape": list(v.shape),
                           "off": total, "nbytes": nbytes})
            total += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        else:
            header.append({"t": "py", "v": v})
    fd = os.memfd_create("korch", os.MFD_CLOEXEC)
    size = max(total, ALIGN)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    for v, h in zip(values, header):
        if h["t"] == "tensor" and v.numel() > 0:
            dst = torch.frombuffer(mm, dtype=v.dtype, count=v.numel(), offset=h["off"])
            dst.copy_(v.detach().reshape(-1))
            del dst
    return header, fd, mm


def unpack(header, mm, copy):
    out = []
    for h in header:
        if h.get("t") == "tensor":
            dt = _DTYPES.get(h["dtype"])
            if dt is None:
                raise ValueError("unsupported dtype %r" % h["dtype"])
            shape = [int(s) for s in h["shape"]]
            numel = math.prod(shape)
            esize = torch.empty((), dtype=dt).element_size()
            if numel * esize != h["nbytes"] or h["off"] < 0 or h["off"] + h["nbytes"] > len(mm):
                raise ValueError("tensor header does not match its region")
            if numel == 0:
                t = torch.empty(shape, dtype=dt)
            else:
                t = torch.frombuffer(mm, dtype=dt, count=numel, offset=h["off"]).view(shape)
                if copy:
                    t = t.clone()
            out.append(t)
        else:
            out.append(h.get("v"))
    return out


class Channel:
    def __init__(self, fd, timeout=None):
        self.sock = socket.socket(fileno=fd)
        self.sock.settimeout(timeout)

    def send(self, obj, fds=()):
        data = json.dumps(obj).encode()
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.sendall(data)

    def recv(self):
        data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MSG, 4)
        if not data:
            for fd in fds:
                os.close(fd)
            raise EOFError("peer closed")
        return json.loads(data), fds


# ----------------------------------------------------------------------------- candidate runner

_PREBUILT = {}
_STATE = {"ablate": False, "kernel_calls": 0, "loaded": 0}


def _poison(value):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            return torch.full_like(value, float("nan"))
        if value.dtype == torch.bool:
            return torch.logical_not(value)
        return torch.full_like(value, 0x5A5A)
    if isinstance(value, (tuple, list)):
        return type(value)(_poison(v) for v in value)
    return value


def _wrap_entry(fn):
    def entry_point(*args, **kwargs):
        _STATE["kernel_calls"] += 1
        if not _STATE["ablate"]:
            return fn(*args, **kwargs)
        before = [a.clone() if isinstance(a, torch.Tensor) else None for a in args]
        r = fn(*args, **kwargs)
        for a, b in zip(args, before):
            if b is not None and not torch.equal(a, b):
                a.copy_(_poison(a))  # an out-parameter the kernel wrote
        return _poison(r)
    return entry_point


def shim_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                     extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                     build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                     with_pytorch_error_handling=True, keep_intermediates=True, **_ignored):
    """Trusted stand-in for torch.utils.cpp_extension.load_inline: loads the
    library the compile stage built for exactly these arguments; never builds."""
    entry = normalize_entry(name, cpp_sources, cuda_sources, functions, extra_cflags,
                            extra_cuda_cflags, extra_ldflags, with_cuda)
    key = cache_key(entry)
    info = _PREBUILT.get(key)
    if info is None:
        raise RuntimeError("korch: load_inline(%r) was called with arguments that differ from the "
                           "statically resolved ones; no prebuilt library (key %s)" % (name, key[:12]))
    path = os.path.join(info["dir"], info["so"])
    loader = importlib.machinery.ExtensionFileLoader(info["module"], path)
    spec = importlib.util.spec_from_file_location(info["module"], path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    proxy = types.ModuleType(name)
    for attr in dir(mod):
        if attr.startswith("_"):
            continue
        fn = getattr(mod, attr)
        if callable(fn):
            setattr(proxy, attr, _wrap_entry(fn))
    _STATE["loaded"] += 1
    return proxy


def _storage_range(t):
    try:
        st = t.storage()
        return st.data_ptr(), st.data_ptr() + st.nbytes()
    except Exception:  # noqa: BLE001
        return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()


def _candidate_setup(msg):
    global _PREBUILT
    _PREBUILT = msg.get("prebuilt", {})
    cpp_ext.load_inline = shim_load_inline
    cand_dir = "/tmp/korch_candidate"
    os.makedirs(cand_dir, mode=0o700, exist_ok=True)
    path = os.path.join(cand_dir, "korch_candidate.py")
    with open(path, "w") as f:
        f.write(msg["code"])
    sys.path.insert(0, cand_dir)
    spec = importlib.util.spec_from_file_location("korch_candidate", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["korch_candidate"] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "ModelNew"):
        raise RuntimeError("the candidate module defines no ModelNew")
    init = msg.get("init_inputs", [])
    torch.manual_seed(int(msg["init_seed"]))
    model = mod.ModelNew(*init)
    return model


def candidate_main(ctx_json):
    ctx = json.loads(ctx_json)
    torch.set_num_threads(1)
    ch = Channel(ctx["sock_fd"])
    model = None
    ch.send({"op": "hello", "protections": ctx.get("protections", [])})
    while True:
        try:
            msg, fds = ch.recv()
        except EOFError:
            return ""
        op = msg.get("op")
        if op == "exit":
            return ""
        if op == "setup":
            try:
                model = _candidate_setup(msg)
                ch.send({"ok": True, "entry_modules": _STATE["loaded"]})
            except BaseException:  # noqa: BLE001
                ch.send({"ok": False, "error": _tail(traceback.format_exc())})
            continue
        if op != "call":
            ch.send({"ok": False, "error": "unknown op"})
            continue
        mm = None
        try:
            fd = fds[0]
            size = os.fstat(fd).st_size
            # Populated up front: first-touch page faults are not the kernel's time.
            mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
            os.close(fd)
            args = unpack(msg["args"], mm, copy=False)
            base = torch.frombuffer(mm, dtype=torch.uint8, count=1).data_ptr()
            _STATE["ablate"] = bool(msg.get("ablate"))
            calls0 = _STATE["kernel_calls"]
            t0 = time.perf_counter_ns()
            out = model(*args)
            t1 = time.perf_counter_ns()
            _STATE["ablate"] = False
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            reply = {"ok": True, "t_ns": t1 - t0, "kernel_calls": _STATE["kernel_calls"] - calls0,
                     "tuple": isinstance(out, (tuple, list)), "alias": False, "subclass": False}
            for o in outs:
                if not isinstance(o, torch.Tensor):
                    raise TypeError("forward returned %s, not a tensor" % type(o).__name__)
                if type(o) is not torch.Tensor and type(o) is not torch.nn.Parameter:
                    reply["subclass"] = True
                if o.device.type != "cpu":
                    raise TypeError("output on device %s" % o.device)
                lo, hi = _storage_range(o)
                if o.numel() > 0 and lo < base + size and hi > base:
                    reply["alias"] = True
            plain = [torch.Tensor(o).detach() if reply["subclass"] else o.detach() for o in outs]
            header, ofd, omm = pack(plain)
            del plain, outs, out, args
            reply["outputs"] = header
            ch.send(reply, [ofd])
            os.close(ofd)
            omm.close()
        except BaseException:  # noqa: BLE001
            _STATE["ablate"] = False
            ch.send({"ok": False, "error": _tail(traceback.format_exc())})


# ----------------------------------------------------------------------------- judge

class Verdict(Exception):
    def __init__(self, verdict, error, **evidence):
        super().__init__(error)
        self.verdict = verdict
        self.error = error
        self.evidence = evidence


def derive(seed, label):
    h = hashlib.sha256(("%d:%s" % (seed, label)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def load_task(source):
    mod = types.ModuleType("korch_task")
    exec(compile(source, "korch_task.py", "exec"), mod.__dict__)  # trusted reference
    return mod


def tensors_of(values):
    return [v for v in values if isinstance(v, torch.Tensor)]


def nbytes_of(values):
    return sum(v.numel() * v.element_size() for v in tensors_of(values))


def as_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


class Judge:
    def __init__(self, ctx, job):
        self.ctx = ctx
        self.job = job
        self.mode = job.get("mode", "submit")
        self.atol, self.rtol = TOLERANCES.get(job.get("tolerance", "strict"), TOLERANCES["strict"])
        self.budget = int(job.get("memory_budget_mb", 4096)) << 20
        self.deadline = time.monotonic() + float(job.get("timeout_s", 300))
        self.evidence = {"trials": [], "families": []}
        self.cand_protections = []
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.mismatch = 0.0
        self.kernel_calls = 0
        self.ch = None

    # -- candidate I/O
    def _remaining(self):
        return max(0.5, self.deadline - time.monotonic())

    def _recv(self):
        self.ch.sock.settimeout(self._remaining())
        try:
            return self.ch.recv()
        except socket.timeout:
            raise Verdict("timeout", "the candidate did not answer before the evaluation's "
                          "wall-clock limit") from None
        except (EOFError, ConnectionError, OSError):
            self._candidate_died()

    def _candidate_died(self):
        pid = self.ctx["cand_pid"]
        detail = ""
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = __import__("signal").Signals(sig).name
            except Exception:  # noqa: BLE001
                name = str(sig)
            detail = "killed by signal %d (%s)" % (sig, name)
        elif os.WIFEXITED(status):
            detail = "exited with status %d" % os.WEXITSTATUS(status)
        raise Verdict("worker_crash", "the candidate runner crashed: " + detail, exit=detail)

    def call_candidate(self, args, ablate=False):
        header, fd, mm = pack(args)
        t0 = time.perf_counter_ns()
        self.ch.send({"op": "call", "args": header, "ablate": ablate}, [fd])
        os.close(fd)
        reply, fds = self._recv()
        rt = time.perf_counter_ns() - t0
        try:
            if not reply.get("ok"):
                raise Verdict("runtime_error", "the candidate raised an exception",
                              traceback=str(reply.get("error", ""))[-4000:])
            if not fds:
                raise Verdict("runtime_error", "protocol violation: no output region")
            omm = mmap.mmap(fds[0], os.fstat(fds[0]).st_size)
            try:
                outs = unpack(reply.get("outputs", []), omm, copy=True)  # our own copy
            except (ValueError, TypeError) as ex:
                raise Verdict("runtime_error", "protocol violation: %s" % ex) from None
            omm.close()
            # Inputs unchanged after the call?
            now = unpack(header, mm, copy=False)
            mutated = [i for i, (a, b) in enumerate(zip(args, now))
                       if isinstance(a, torch.Tensor) and not _same(a, b)]
            del now
            t_ns = reply.get("t_ns")
            if not isinstance(t_ns, int) or t_ns < 0 or t_ns > rt:
                raise Verdict("impossible_timing", "the candidate runner reported a time "
                              "outside its round trip", reported_ns=t_ns, round_trip_ns=rt)
            self.kernel_calls += int(reply.get("kernel_calls", 0) or 0)
            info = {"mutated": mutated, "alias": bool(reply.get("alias")),
                    "subclass": bool(reply.get("subclass")), "t_ns": t_ns, "rt_ns": rt,
                    "tuple": bool(reply.get("tuple")),
                    "kernel_calls": int(reply.get("kernel_calls", 0) or 0)}
            return outs, info
        finally:
            for f in fds:
                try:
                    os.close(f)
                except OSError:
                    pass
            del mm

    # -- comparisons
    def compare(self, ref_out, outs, info, label, raise_on_fail=True):
        """Returns None when the candidate's outputs pass, else a reason."""
        refs = as_outputs(ref_out)
        reason = None
        if info["subclass"]:
            reason = "the output is a tensor subclass"
        elif info["alias"]:
            reason = "the output aliases an input"
        elif info["mutated"]:
            reason = "the candidate modified its input(s) %s" % info["mutated"]
        elif len(outs) != len(refs):
            reason = "returned %d outputs, expected %d" % (len(outs), len(refs))
        else:
            for i, (r, c) in enumerate(zip(refs, outs)):
                reason = self._compare_tensor(r, c)
                if reason:
                    reason = ("output %d: " % i if len(refs) > 1 else "") + reason
                    break
        self.evidence["trials"].append({"label": label, "ok": reason is None,
                                        **({"reason": reason} if reason else {})})
        if reason and raise_on_fail:
            raise Verdict("incorrect", "%s: %s" % (label, reason))
        return reason

    def _compare_tensor(self, r, c):
        if not isinstance(r, torch.Tensor):
            return None
        if tuple(c.shape) != tuple(r.shape):
            return "shape %s, expected %s" % (list(c.shape), list(r.shape))
        if c.dtype != r.dtype:
            return "dtype %s, expected %s" % (c.dtype, r.dtype)
        if not (r.is_floating_point() or r.is_complex()):
            if not torch.equal(c, r):
                self.mismatch = max(self.mismatch, float((c != r).double().mean()))
                return "values differ (exact dtype %s)" % r.dtype
            return None
        atol, rtol = self.atol, self.rtol
        if r.dtype in (torch.float16, torch.bfloat16):
            atol = rtol = max(atol, LOW_PRECISION_TOL)
        rf, cf = r.double(), c.double()
        finite = torch.isfinite(rf)
        if not torch.equal(torch.isfinite(cf), finite):
            return "non-finite values where the reference is finite (or vice versa)"
        if not torch.equal(torch.isnan(cf), torch.isnan(rf)):
            return "NaN pattern differs"
        rfz = torch.where(finite, rf, torch.zeros_like(rf))
        cfz = torch.where(finite, cf, torch.zeros_like(cf))
        if not finite.all() and not torch.equal(rf[~finite].nan_to_num(), cf[~finite].nan_to_num()):
            return "infinities differ"
        diff = (cfz - rfz).abs()
        if diff.numel():
            self.max_abs = max(self.max_abs, float(diff.max()))
            self.max_rel = max(self.max_rel, float((diff / rfz.abs().clamp_min(1e-12)).max()))
        bad = diff > (atol + rtol * rfz.abs())
        if diff.numel():
            self.mismatch = max(self.mismatch, float(bad.double().mean()))
        if bool(bad.any()):
            return "max |diff| %.3g exceeds atol %.0e / rtol %.0e at %d of %d elements" % (
                float(diff.max()), atol, rtol, int(bad.sum()), bad.numel())
        ref_norm = float(rfz.norm())
        if ref_norm > 0:
            rel = float((cfz - rfz).norm()) / ref_norm
            if rel > rtol:
                return "relative error norm %.3g > %.0e (||out-ref||/||ref||)" % (rel, rtol)
        # Normalisation implied by the reference (softmax rows, unit vectors).
        if r.dim() >= 1 and r.shape[-1] > 1 and r.numel() > r.shape[-1] * 0:
            rs = rfz.sum(-1)
            if torch.allclose(rs, torch.ones_like(rs), atol=1e-4):
                cs = cfz.sum(-1)
                if not torch.allclose(cs, torch.ones_like(cs), atol=max(1e-3, 10 * atol)):
                    return "rows do not sum to 1 as the reference's do"
            rn = rfz.norm(dim=-1)
            if torch.allclose(rn, torch.ones_like(rn), atol=1e-4):
                cn = cfz.norm(dim=-1)
                if not torch.allclose(cn, torch.ones_like(cn), atol=max(1e-3, 10 * atol)):
                    return "rows are not unit-norm as the reference's are"
        return None

    # -- inputs
    def gen_inputs(self, seed):
        torch.manual_seed(seed)
        try:
            return list(self.task.get_inputs())
        except (MemoryError, RuntimeError) as ex:
            if "alloc" in str(ex).lower() or isinstance(ex, MemoryError):
                raise Verdict("task_too_large", "the task's inputs do not fit the memory budget "
                              "(%d MB): %s" % (self.budget >> 20, str(ex)[:200])) from None
            raise

    def ref_forward(self, args):
        with torch.no_grad():
            try:
                return self.ref(*args)
            except (MemoryError, RuntimeError) as ex:
                if "alloc" in str(ex).lower() or isinstance(ex, MemoryError):
                    raise Verdict("task_too_large", "the reference does not fit the memory "
                                  "budget: %s" % str(ex)[:200]) from None
                raise

    def families(self, base):
        """Adversarial inputs where the task's generator is too narrow."""
        g = torch.Generator().manual_seed(derive(self.seed, "families"))
        fams = []

        def remap(fn):
            return [fn(v) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                    for v in base]
        fams.append(("signed", remap(lambda v: (torch.rand(v.shape, generator=g) * 64 - 32).to(v.dtype))))
        fams.append(("zeros", remap(torch.zeros_like)))
        fams.append(("constant", remap(lambda v: torch.full_like(v, 3.0))))
        fams.append(("sparse", remap(lambda v: (torch.randn(v.shape, generator=g) * 8 *
                                                (torch.rand(v.shape, generator=g) < 0.1)).to(v.dtype))))
        name = (self.job.get("task_name") or "").lower()
        if "softmax" in name or "attention" in name:
            def peaked(v):
                w = torch.randn(v.shape, generator=g).to(v.dtype)
                if v.dim() >= 1:
                    w.view(-1, v.shape[-1])[:, 0] += 40
                return w
            fams.append(("peaked", remap(peaked)))
        if not any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in base):
            return []
        return fams

    @staticmethod
    def usable(ref_out):
        outs = [o for o in as_outputs(ref_out) if isinstance(o, torch.Tensor)]
        if not outs:
            return False
        for o in outs:
            if not (o.is_floating_point() or o.is_complex()):
                continue
            if not bool(torch.isfinite(o).all()):
                return False
        flat = torch.cat([o.detach().double().reshape(-1) for o in outs])
        return flat.numel() > 1 and float(flat.max() - flat.min()) > 0

    def trial(self, label, args, ablate=False):
        ref_out = self.ref_forward(args)
        outs, info = self.call_candidate(args, ablate=ablate)
        return ref_out, outs, info

    # -- the pipeline
    def run(self):
        torch.set_num_threads(1)
        torch.set_grad_enabled(False)
        job = self.job
        seed_fd = self.ctx.get("seed_fd", -1)
        seed = 0
        if seed_fd is not None and seed_fd >= 0:
            raw = b""
            while True:
                chunk = os.read(seed_fd, 64)
                if not chunk:
                    break
                raw += chunk
            os.close(seed_fd)
            seed = int(raw.decode().strip() or "0")
        public = self.mode == "check"
        self.seed = seed
        self.task = load_task(job["task_source"])

        init_seed = 42 if public else derive(seed, "init")
        torch.manual_seed(init_seed if public else derive(seed, "init_inputs"))
        init_inputs = list(self.task.get_init_inputs())
        torch.manual_seed(init_seed)
        self.ref = self.task.Model(*init_inputs)

        # Memory estimate from one input set and its reference output.
        first = self.gen_inputs(0 if public else derive(seed, "trial:0"))
        first_ref = self.ref_forward(first)
        est = 2 * nbytes_of(first) + 2 * nbytes_of(as_outputs(first_ref))
        self.evidence["estimated_bytes"] = est
        if est > self.budget:
            raise Verdict("task_too_large", "inputs, pristine copies and outputs need %.1f MB, "
                          "over the %d MB budget" % (est / 2**20, self.budget >> 20))

        self.ch = Channel(self.ctx["sock_fd"])
        hello, _ = self._recv()
        self.cand_protections = hello.get("protections", [])
        self.ch.send({"op": "setup", "code": job["code"], "prebuilt": job.get("prebuilt", {}),
                      "init_inputs": [v for v in init_inputs if not isinstance(v, torch.Tensor)]
                      if all(not isinstance(v, torch.Tensor) for v in init_inputs) else [],
                      "init_seed": init_seed})
        reply, _ = self._recv()
        if not reply.get("ok"):
            raise Verdict("runtime_error", "importing or constructing ModelNew failed",
                          traceback=str(reply.get("error", ""))[-4000:])
        entry_modules = int(reply.get("entry_modules", 0))
        self.evidence["entry_modules"] = entry_modules

        # Correctness.
        n_trials = 1 if public else int(job.get("trials", 5))
        for i in range(n_trials):
            args = first if i == 0 else self.gen_inputs(derive(seed, "trial:%d" % i))
            ref_out = first_ref if i == 0 else self.ref_forward(args)
            outs, info = self.call_candidate(args)
            self.compare(ref_out, outs, info, "trial %d" % i)
        if public:
            return {"verdict": "ok", "correct": True}

        for name, args in self.families(first):
            ref_out = self.ref_forward(args)
            if not self.usable(ref_out):
                self.evidence["families"].append({"family": name, "used": False})
                continue
            self.evidence["families"].append({"family": name, "used": True})
            outs, info = self.call_candidate(args)
            self.compare(ref_out, outs, info, "family '%s'" % name)

        # no_kernel by ablation.
        if entry_modules == 0:
            raise Verdict("no_kernel", "the candidate loads no kernel (no load_inline library)")
        if self.kernel_calls == 0:
            raise Verdict("no_kernel", "the candidate's kernels are never called by forward")
        ablation_passed = True
        for i in range(2):
            args = self.gen_inputs(derive(seed, "ablate:%d" % i))
            ref_out = self.ref_forward(args)
            outs, info = self.call_candidate(args, ablate=True)
            if self.compare(ref_out, outs, info, "ablation %d" % i, raise_on_fail=False) is not None:
                ablation_passed = False
        if ablation_passed:
            raise Verdict("no_kernel", "outputs stay correct with the candidate's kernels "
                          "poisoned: the kernels do no real work")

        # Timing.
        timing = self.time_both()

        # Correctness again on a fresh seed.
        args = self.gen_inputs(derive(seed, "post"))
        outs, info = self.call_candidate(args)
        self.compare(self.ref_forward(args), outs, info, "after timing")
        timing.update({"verdict": "ok", "correct": True})
        return timing

    def time_both(self):
        job = self.job
        n_sets = int(job.get("timing_sets", 4))
        blocks = int(job.get("timing_blocks", 10))
        per_block = int(job.get("timing_block_calls", 5))
        warmup = int(job.get("timing_warmup", 3))
        sets = [self.gen_inputs(derive(self.seed, "timing:%d" % j)) for j in range(n_sets)]
        refs = [self.ref_forward(s) for s in sets]
        fingerprints = {"ref": [], "cand": []}
        for k in range(warmup):
            self.ref_forward(sets[k % n_sets])
            outs, info = self.call_candidate(sets[k % n_sets])
        ref_t, cand_t = [], []
        k = 0
        for b in range(blocks):
            for side in ("ref", "cand") if b % 2 == 0 else ("cand", "ref"):
                for _ in range(per_block):
                    j = k % n_sets
                    k += 1
                    if side == "ref":
                        t0 = time.perf_counter_ns()
                        self.ref(*sets[j])
                        ref_t.append(time.perf_counter_ns() - t0)
                    else:
                        outs, info = self.call_candidate(sets[j])
                        cand_t.append(info["t_ns"])
                        fingerprints["cand"].append(
                            [float(o.double().sum()) for o in outs if o.is_floating_point()])
                        fingerprints["ref"].append(
                            [float(o.double().sum()) for o in as_outputs(refs[j])
                             if o.is_floating_point()])
                        self.compare(refs[j], outs, info, "timed call %d" % len(cand_t))
        # Keep the evidence small.
        self.evidence["trials"] = [t for t in self.evidence["trials"]
                                   if not t["label"].startswith("timed call")] + \
            [{"label": "timed calls", "ok": True, "count": len(cand_t)}]
        med_ref = _median(ref_t)
        med_cand = max(_median(cand_t), 1)
        rng = random.Random(derive(self.seed, "bootstrap"))
        boots = []
        for _ in range(1000):
            r = _median([rng.choice(ref_t) for _ in ref_t])
            c = max(_median([rng.choice(cand_t) for _ in cand_t]), 1)
            boots.append(r / c)
        boots.sort()
        self.evidence["timing"] = {"ref_ns": ref_t, "cand_ns": cand_t,
                                   "fingerprints_match": True, "threads": torch.get_num_threads()}
        return {"speedup": med_ref / med_cand, "speedup_ci_low": boots[25],
                "speedup_ci_high": boots[974], "ref_time_ms": med_ref / 1e6,
                "cand_time_ms": med_cand / 1e6}


def _same(a, b):
    if a.is_floating_point() or a.is_complex():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)


def _median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return 0
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def reference_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
    judge = Judge(ctx, job)
    result = {}
    try:
        result = judge.run()
    except Verdict as v:
        result = {"verdict": v.verdict, "correct": False, "error": v.error}
        if "traceback" in v.evidence:
            result["runtime_detail"] = v.evidence.pop("traceback")
        judge.evidence.update(v.evidence)
    except BaseException:  # noqa: BLE001
        result = {"verdict": "worker_crash", "correct": False,
                  "error": "the reference runner failed",
                  "runtime_detail": _tail(traceback.format_exc())}
    result.update({"max_abs_diff": judge.max_abs, "max_rel_diff": judge.max_rel,
                   "mismatch_frac": judge.mismatch, "evidence": judge.evidence,
                   "candidate_protections": judge.cand_protections,
                   "protections": ctx.get("protections", [])})
    try:
        if judge.ch is not None:
            judge.ch.send({"op": "exit"})
    except Exception:  # noqa: BLE001
        pass
    _write_result(ctx, result)
    return ""


# ----------------------------------------------------------------------------- validate

def validate_main(ctx_json):
    ctx = json.loads(ctx_json)
    job = json.loads(ctx["job"])
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    issues = []
    res = {}
    try:
        task = load_task(job["task_source"])
        budget = int(job.get("memory_budget_mb", 4096)) << 20

        def build():
            torch.manual_seed(1)
            init = list(task.get_init_inputs())
            torch.manual_seed(2)
            return task.Model(*init)

        def inputs(seed):
            torch.manual_seed(seed)
            return list(task.get_inputs())
        m1 = build()
        x1 = inputs(11)
        est = 2 * nbytes_of(x1)
        t0 = time.perf_counter()
        o1 = as_outputs(m1(*x1))
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
    except (MemoryError, RuntimeError) as ex:
        if "alloc" in str(ex).lower() or isinstance(ex, MemoryError):
            issues.append("over_budget: allocation failed: %s" % str(ex)[:200])
        else:
            issues.append("error: %s" % _tail(traceback.format_exc(), 1500))
    except BaseException:  # noqa: BLE001
        issues.append("error: %s" % _tail(traceback.format_exc(), 1500))
    res["issues"] = issues
    res["ok"] = not issues
    _write_result(ctx, res)
    return ""
