"""Whole-tensor tests of the judge a chunk at a time (issue #47): their
temporaries (float64 copies, masks) are of one chunk, never of a whole output,
which can be gigabytes -- a float64 copy of a 6.4 GB output asked an 80 GB GPU
for 13 GB more. Judge.MEMORY_MULTIPLE counts them. A leaf module."""
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
