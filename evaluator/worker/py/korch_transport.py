"""How tensors travel between the judge and the runners (DESIGN §5).

CPU: a call's tensors travel in a fresh memfd (SCM_RIGHTS); the receiver
maps it. Timed CPU calls instead use two regions per runner (inputs,
outputs), memfds created by the judge and mapped once by both ends: a fresh
memfd costs ~6 ms of page faults per 4 MB on the CI box, six times a 1 ms
model, and that overhead left room for too few timed calls (issue #7). The
timing's input sets also sit in one sealed memfd (sealed_sets: written once,
then no process can write it), which every timing runner maps read-only; a
timed call names the set, and the runner's harness copies it into its input
region before its window, so the inputs a model reads come from its own
core's caches, as a model's inputs do in a network (a judge writing 4 MB of
inputs from the other core before each call made the runners' times 1.2-2x
as noisy on the dev VM; tools/bench/README.md). Calls on inputs the runner
must not see early (the replay probe's unseen sets) are written by the judge
as before. The judge checks every call's inputs after it against its own
copy; the runner's harness copies the outputs into the output region. GPU: the judge owns every device buffer a runner touches, allocated
with cudaMalloc through the trusted _korch_cuda module and exported once as
CUDA IPC handles; before each call the judge writes that call's inputs into
the exchange buffers, and after it the runner's trusted harness copies the
outputs into the judge's output slots. A runner therefore never sees another
call's inputs, and the judge reads outputs from its own memory.

Headers are JSON: {"t": "tensor", "dtype", "shape", "off", "nbytes"} (CPU) or
{"t": "tensor", "dtype", "shape", "slot", "nbytes"} (GPU), {"t": "py", "v"}.
"""
import base64
import ctypes
import errno
import fcntl
import json
import math
import mmap
import os
import socket
import time

import torch

ALIGN = 64
MAX_MSG = 16 << 20

DTYPES = {n: getattr(torch, n) for n in (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
    "bool", "complex64", "complex128")}


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def element_size(dt):
    return torch.empty((), dtype=dt).element_size()


# ----------------------------------------------------------------------------- CPU: memfd

def layout(values):
    """(header, bytes) of `values` packed from offset 0, each tensor aligned
    to ALIGN; the byte count is a multiple of ALIGN."""
    header, total = [], 0
    for v in values:
        if isinstance(v, torch.Tensor):
            nbytes = v.numel() * v.element_size()
            header.append({"t": "tensor", "dtype": dtype_name(v.dtype), "shape": list(v.shape),
                           "off": total, "nbytes": nbytes})
            total += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        else:
            header.append({"t": "py", "v": v})
    return header, total


def write(buf, values, header):
    """Copies the tensors of `values` into `buf` where `header` places them:
    a contiguous CPU tensor by memmove (64 MB in ~5 ms here against ~8 ms
    for copy_: a runner copies every timed call's outputs out), any other
    by copy_."""
    for v, h in zip(values, header):
        if h["t"] == "tensor" and v.numel() > 0:
            dst = torch.frombuffer(buf, dtype=v.dtype, count=v.numel(), offset=h["off"])
            # (korch_chunks.plain_cpu's test; this module is a leaf)
            if v.device.type == "cpu" and v.layout == torch.strided and v.is_contiguous() and \
                    not v.is_conj() and not v.is_neg():
                ctypes.memmove(dst.data_ptr(), v.data_ptr(), v.numel() * v.element_size())
            else:
                dst.copy_(v.detach().reshape(-1))
            del dst


def pack(values):
    """Packs a list of tensors / JSON scalars into (header, memfd, mmap)."""
    header, total = layout(values)
    fd = os.memfd_create("korch", os.MFD_CLOEXEC)
    size = max(total, ALIGN)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    write(mm, values, header)
    return header, fd, mm


class Region:
    """A shared memfd mapped once (populated: its page faults are paid at
    setup, not per call). The judge creates it (fd=None) and sends the fd;
    the runner maps what it received (readonly: a sealed_sets fd)."""

    def __init__(self, size, fd=None, readonly=False):
        if fd is None:
            fd = os.memfd_create("korch-region", os.MFD_CLOEXEC)
            os.ftruncate(fd, size)
        elif os.fstat(fd).st_size < size:
            raise ValueError("region smaller than announced")
        self.fd, self.size = fd, size
        self.mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                            prot=mmap.PROT_READ if readonly else mmap.PROT_READ | mmap.PROT_WRITE)

    def close_fd(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def copy_spans(header, key, src_size, dst_size, what, optional=False):
    """(bytes, source offset, region offset) of each non-empty tensor of
    `header` that is copied into the input region from another source: its
    offset there is h[key], its place in the region h["off"]. One outside
    either (src_size, dst_size bytes) is refused, not followed. `optional`:
    entries without `key` are skipped (else they are an error)."""
    for h in header:
        if h.get("t") != "tensor" or not h["nbytes"] or (optional and key not in h):
            continue
        n, src, dst = int(h["nbytes"]), int(h[key]), int(h["off"])
        if src < 0 or dst < 0 or src + n > src_size or dst + n > dst_size:
            raise ValueError("%s tensor outside its region" % what)
        yield n, src, dst


def read_later(header, fd, region):
    """A deferred CPU batch (korch_judge's `later` calls), in its runner:
    reads each tensor of `header` that has a "later" offset from the memfd
    `fd` to its place ("off") in the input `region`. The runner reads the
    memfd only after the batch's untimed first call, and never maps it: a
    model that computes the batch's later calls during that first call
    (reading ahead in the input region) finds no inputs there yet. (pread
    into the region: no page of the runner is faulted in between the first
    call and the window.)"""
    size = os.fstat(fd).st_size
    with memoryview(region.mm) as inputs:
        for n, at, dst in copy_spans(header, "later", size, region.size, "later", optional=True):
            with inputs[dst:dst + n] as into:
                if os.preadv(fd, [into], at) != n:
                    raise ValueError("later tensor cut short")


# (Linux 5.1; Python's fcntl does not name it) no new writable mapping
F_SEAL_FUTURE_WRITE = 0x0010


def sealed_sets(sets, layouts):
    """The input sets `sets` (each laid out by its `layouts` entry, as
    layout() gives) back to back in a fresh memfd that is then sealed: no
    write, no writable mapping, no resize, from any process, the judge's
    included. Returns (fd, size, bases): set j's tensor at header offset
    `off` sits at bases[j] + off. A runner that maps it can read every set
    and change none, so no candidate can alter what a reference runner is
    given (tests/evaluator/worker/test_sealed_sets.py tries)."""
    bases, total = [], 0
    for _, nbytes in layouts:
        bases.append(total)
        total += max(nbytes, ALIGN)
    fd = os.memfd_create("korch-sets", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, total)
        mm = mmap.mmap(fd, total)
        for vals, (header, _), base in zip(sets, layouts, bases):
            write(mm, vals, [dict(h, off=h["off"] + base) if h["t"] == "tensor" else h
                             for h in header])
        mm.close()  # (no writable mapping may exist when F_SEAL_WRITE is added)
        seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | F_SEAL_FUTURE_WRITE)
        except OSError as ex:  # a kernel before 5.1: F_SEAL_WRITE alone
            if ex.errno != errno.EINVAL:
                raise
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(fd)
        raise
    return fd, total, bases


def header_tensor(h):
    """(dtype, shape) of a tensor header entry; ValueError if unusable."""
    dt = DTYPES.get(h.get("dtype"))
    if dt is None:
        raise ValueError("unsupported dtype %r" % h.get("dtype"))
    return dt, [int(s) for s in h["shape"]]


def unpack(header, mm, copy):
    out = []
    for h in header:
        if h.get("t") == "tensor":
            dt, shape = header_tensor(h)
            numel = math.prod(shape)
            if numel * element_size(dt) != h["nbytes"] or h["off"] < 0 or \
                    h["off"] + h["nbytes"] > len(mm):
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


# ----------------------------------------------------------------------------- GPU: IPC

class _CudaArray:
    """A raw device allocation as torch.as_tensor understands it."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (max(int(nbytes), 1),), "typestr": "|u1",
                                         "data": (int(ptr), False), "version": 2,
                                         "strides": None}


def wrap_device(ptr, nbytes, dtype, shape, device):
    """A tensor of `dtype`/`shape` viewing the first bytes of a raw allocation."""
    raw = torch.as_tensor(_CudaArray(ptr, nbytes), device=device)
    numel = math.prod(shape)
    need = numel * element_size(dtype)
    if need > nbytes:
        raise ValueError("%d bytes do not fit a %d-byte buffer" % (need, nbytes))
    if numel == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    return raw[:need].view(dtype).view(shape)


class DeviceBuffers:
    """Judge side: device allocations shared with the runners by IPC handle."""

    total = 0  # bytes allocated by every instance (the judge's own device memory)

    def __init__(self, device):
        import _korch_cuda  # trusted, built into korch-worker
        self.kc = _korch_cuda
        self.device = device
        self.ptrs = []
        self.sizes = []

    def add(self, nbytes):
        nbytes = max(int(nbytes), ALIGN)
        self.ptrs.append(self.kc.alloc(nbytes))
        DeviceBuffers.total += nbytes
        self.sizes.append(nbytes)
        return len(self.ptrs) - 1

    def tensor(self, slot, dtype, shape):
        return wrap_device(self.ptrs[slot], self.sizes[slot], dtype, list(shape), self.device)

    def handles(self):
        return [{"handle": base64.b64encode(self.kc.export(p)).decode(), "nbytes": n}
                for p, n in zip(self.ptrs, self.sizes)]


class OpenedBuffers:
    """Runner side: the judge's buffers, opened once."""

    def __init__(self, handles, device):
        import _korch_cuda
        self.device = device
        self.ptrs = [_korch_cuda.open(base64.b64decode(h["handle"])) for h in handles]
        self.sizes = [int(h["nbytes"]) for h in handles]

    def tensor(self, slot, dtype, shape):
        if not 0 <= slot < len(self.ptrs):
            raise ValueError("no buffer %r" % slot)
        return wrap_device(self.ptrs[slot], self.sizes[slot], dtype, list(shape), self.device)


def device_args(header, bufs):
    out = []
    for h in header:
        if h.get("t") == "tensor":
            dt, shape = header_tensor(h)
            out.append(bufs.tensor(int(h["slot"]), dt, shape))
        else:
            out.append(h.get("v"))
    return out


# ----------------------------------------------------------------------------- channel

class Channel:
    """One JSON object per SOCK_SEQPACKET datagram, with optional fds."""

    def __init__(self, fd, timeout=None):
        self.sock = socket.socket(fileno=fd)
        self.sock.settimeout(timeout)

    def send(self, obj, fds=()):
        data = json.dumps(obj).encode()
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.sendall(data)

    def recv(self, spin_ns=0):
        """The next message. `spin_ns` > 0: poll for it that long before
        blocking, yielding the core to anything else runnable on it (see
        korch_runner: a runner told that its next call follows at once keeps
        its core awake between the two)."""
        if spin_ns > 0:
            end = time.perf_counter_ns() + spin_ns
            while time.perf_counter_ns() < end:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MSG, 4,
                                                               socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    os.sched_yield()
                    continue
                return self._message(data, fds)
        data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MSG, 4)
        return self._message(data, fds)

    @staticmethod
    def _message(data, fds):
        if not data:
            for fd in fds:
                os.close(fd)
            raise EOFError("peer closed")
        return json.loads(data), fds


# ----------------------------------------------------------------------------- a role's result

def write_result(ctx, result):
    result.setdefault("protections", ctx.get("protections", []))
    data = json.dumps(result).encode()
    fd = ctx["result_fd"]
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.close(fd)


def tail(text, n=4000):
    text = text or ""
    return text[-n:]
