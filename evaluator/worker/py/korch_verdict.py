"""What every part of the judge shares: a Verdict (raised to end the job with
a verdict of protocol.json) and the small helpers (seeded derivation,
median, out-of-memory)."""
import hashlib

import korch_protocol


class Verdict(Exception):
    def __init__(self, verdict, error, **evidence):
        super().__init__(error)
        self.verdict = korch_protocol.check_verdict(verdict)
        self.error = error
        self.evidence = evidence


def derive(seed, label):
    h = hashlib.sha256(("%d:%s" % (seed, label)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return 0
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def out_of_memory(ex):
    """A host MemoryError, or torch's allocator failing (CPU or CUDA)."""
    text = str(ex).lower()
    return isinstance(ex, MemoryError) or "alloc" in text or "out of memory" in text
