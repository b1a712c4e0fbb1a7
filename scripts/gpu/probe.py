"""Facts about a GPU machine that korch's GPU evaluator relies on.

  python3 scripts/gpu/probe.py            # prints one JSON object

What it checks: torch/triton/CUDA versions, the GPU (name, SMs, L2, memory),
address space mapped after `import torch` (why RLIMIT_AS cannot confine a
CUDA process), fork-after-import then CUDA init in the child (the zygote
path), and CUDA IPC of a tensor between two processes (the judge hands the
candidate runner its inputs this way) with the cost of opening a handle.
"""
import json
import os
import socket
import subprocess
import sys
import time

out = {}
t0 = time.perf_counter()
import torch  # noqa: E402
out["import_torch_s"] = round(time.perf_counter() - t0, 3)


def vm_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


out["mapped_after_import_gb"] = round(vm_bytes() / 2**30, 2)
out["torch"] = torch.__version__
out["python"] = sys.version.split()[0]
try:
    import triton
    out["triton"] = triton.__version__
except Exception as ex:  # noqa: BLE001
    out["triton"] = "unavailable: %s" % ex

# Fork before CUDA is initialised, then initialise it in the child.
r, w = os.pipe()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(r)
    t1 = time.perf_counter()
    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    os.write(w, json.dumps({"child_cuda_init_s": time.perf_counter() - t1,
                            "ok": float(x.item()) == 1.0}).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)  # the child exits after one small CUDA op
out["fork_then_cuda"] = json.loads(os.read(r, 4096) or b"{}")

p = torch.cuda.get_device_properties(0)
out["gpu"] = {"name": p.name, "sms": p.multi_processor_count,
              "mem_gb": round(p.total_memory / 2**30, 1),
              "l2_mb": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
              "cc": "%d.%d" % (p.major, p.minor)}
out["mapped_after_cuda_init_gb"] = round(vm_bytes() / 2**30, 2)

# CUDA IPC: share a storage with a child that opens it and doubles it.
x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
h = x.untyped_storage()._share_cuda_()
a, b = socket.socketpair()
child = subprocess.Popen([sys.executable, "-c", r'''
import pickle, socket, sys, time, torch
s = socket.socket(fileno=int(sys.argv[1]))
h = pickle.loads(s.recv(1 << 16))
t0 = time.perf_counter()
st = torch.UntypedStorage._new_shared_cuda(*h)
t1 = time.perf_counter()
t = torch.empty(0, dtype=torch.float32, device="cuda").set_(st, 0, (1 << 20,), (1,))
t.mul_(2); torch.cuda.synchronize()
st2 = torch.UntypedStorage._new_shared_cuda(*h)
t2 = time.perf_counter()
s.send(pickle.dumps({"open_s": t1 - t0, "reopen_s": t2 - t1}))
'''.replace("(1 << 20,)", "(%d,)" % (1 << 20)).replace("t2 = time", "t2 = time"), str(b.fileno())],
    pass_fds=[b.fileno()])
import pickle  # noqa: E402
b.close()  # else a crashed child leaves recv waiting forever
a.settimeout(120)
a.send(pickle.dumps(h))
data = a.recv(1 << 16)
msg = pickle.loads(data) if data else {"open_s": float("nan"), "reopen_s": float("nan")}
child.wait()
torch.cuda.synchronize()
out["cuda_ipc"] = {"ok": bool(torch.equal(x, torch.arange(1 << 20, device="cuda",
                                                          dtype=torch.float32) * 2)),
                   "open_ms": round(msg["open_s"] * 1e3, 3),
                   "reopen_ms": round(msg["reopen_s"] * 1e3, 3)}
try:
    out["cgroup_controllers"] = open("/sys/fs/cgroup/cgroup.controllers").read().split()
except OSError as ex:
    out["cgroup_controllers"] = str(ex)
print(json.dumps(out, indent=1))
