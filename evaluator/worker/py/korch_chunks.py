"""Whole-tensor tests of the judge a chunk at a time (issue #47): their
temporaries (float64 copies, masks) are of one chunk, never of a whole output,
which can be gigabytes -- a float64 copy of a 6.4 GB output asked an 80 GB GPU
for 13 GB more. Judge.MEMORY_MULTIPLE counts them. A leaf module."""
import ctypes
import os
import threading

import torch

# Elements per pass.
CHUNK = 1 << 22


def spans(n, chunk=None):
    """(start, stop) of each chunk of n elements."""
    chunk = chunk or CHUNK
    return ((i, min(n, i + chunk)) for i in range(0, n, chunk))


def flat(t):
    """t as one dimension, without a copy where t is contiguous."""
    return t.reshape(-1)


def equal(a, b):
    """torch.equal, chunk by chunk (torch.equal makes a mask of the whole)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = flat(a), flat(b)
    return all(torch.equal(a[i:j], b[i:j]) for i, j in spans(a.numel()))


_memcmp = ctypes.CDLL(None).memcmp
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_memcmp.restype = ctypes.c_int


def plain_cpu(t):
    """A dense, contiguous CPU tensor whose bytes are its values (no
    conjugate or negative view bit)."""
    return t.device.type == "cpu" and t.layout == torch.strided and t.is_contiguous() and \
        not t.is_conj() and not t.is_neg()


# A comparison of at least this many bytes is split in two halves, the second
# on the helper thread (use_helper_cpu), where the judge has one.
SPLIT_BYTES = 16 << 20


class _Helper:
    """One thread, pinned to another core, that compares the second half of
    a large pair while the caller compares the first: ctypes releases the
    GIL, so the two memcmps run at once. The CPU judge lends it the runners'
    core between their calls (korch_timing.Timing.time_both): two 64 MB
    comparisons of a region against the judge's own memory took 18.5 ms one
    after the other and 11.5 ms on two cores here (tools/bench/byte_checks.py)."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.cv = threading.Condition()
        self.job = self.result = None
        threading.Thread(target=self._run, name="korch-compare", daemon=True).start()

    def _run(self):
        try:
            os.sched_setaffinity(0, {self.cpu})  # (this thread only)
        except OSError:
            pass
        while True:
            with self.cv:
                while self.job is None:
                    self.cv.wait()
                job = self.job
            r = _memcmp(*job)
            with self.cv:
                self.job, self.result = None, r
                self.cv.notify_all()

    def memcmp(self, pa, pb, n):
        half = (n // 2) & ~63
        with self.cv:
            self.job, self.result = (pa + half, pb + half, n - half), None
            self.cv.notify_all()
        first = _memcmp(pa, pb, half)
        with self.cv:
            while self.result is None:
                self.cv.wait()
            second = self.result
        return first or second


_HELPER = []


def use_helper_cpu(cpu):
    """Large comparisons (SPLIT_BYTES) from now on use a helper thread on
    `cpu` for half their bytes; cpu < 0 or None: none (one thread)."""
    if _HELPER and (cpu is None or cpu < 0 or _HELPER[0].cpu != cpu):
        _HELPER.clear()  # (an idle daemon thread; a new one for a new core)
    if cpu is not None and cpu >= 0 and not _HELPER:
        _HELPER.append(_Helper(cpu))


def same_bytes(a, b):
    """True or False when a and b are contiguous CPU tensors of one dtype and
    shape, by libc's memcmp of their bytes; None when they are not (the
    caller compares another way). memcmp makes no mask and reads each byte
    once: 64 MB in ~6 ms here, against ~11 ms for torch.equal over int64
    words, on every timed call of a 64 MB output (tools/bench/README.md,
    stop 58)."""
    if not (plain_cpu(a) and plain_cpu(b)) or a.dtype != b.dtype or a.shape != b.shape:
        return None
    n = a.numel() * a.element_size()
    if n >= SPLIT_BYTES and _HELPER:
        return _HELPER[0].memcmp(a.data_ptr(), b.data_ptr(), n) == 0
    return n == 0 or _memcmp(a.data_ptr(), b.data_ptr(), n) == 0


def all_finite(t):
    if not (t.is_floating_point() or t.is_complex()):
        return True
    t = flat(t)
    return all(bool(torch.isfinite(t[i:j]).all()) for i, j in spans(t.numel()))


def sum_squares(t):
    """The float64 sum of squares of t's finite elements, chunk by chunk."""
    t = flat(t)
    total = 0.0
    for i, j in spans(t.numel()):
        x = t[i:j].double()
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        total += float(x.square().sum())
        del x
    return total


def row_reduce(t, fn):
    """fn(rows) (a float64 reduction over the last dimension of a block of
    rows) over t's rows, a block at a time; the rows' results, joined."""
    last = t.shape[-1]
    rows = t.reshape(-1, last)
    per = max(1, CHUNK // max(1, last))
    return torch.cat([fn(rows[i:i + per]) for i in range(0, rows.shape[0], per)])
