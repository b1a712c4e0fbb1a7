"""Comparing a candidate's outputs with the reference's: bit-exact where the
task is integral, else the tolerance profile's atol/rtol with the reference's
own scale (Judge.compare). A mixin of korch_judge.Judge."""
import torch

from korch_chunks import all_finite, equal, flat, row_reduce, same_bytes, spans, sum_squares
from korch_tasks import as_outputs
from korch_verdict import Verdict


_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

def bitwise_equal(a, b):
    """True when a and b hold the same bytes: a fast sufficient test for
    `same` (4 MB in ~1 ms as int64 words; the NaN-aware test takes ~8 ms)."""
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    by_bytes = same_bytes(a, b)
    if by_bytes is not None:
        return by_bytes
    a, b = a.reshape(-1), b.reshape(-1)
    nbytes = a.numel() * a.element_size()
    for width in ((8, a.element_size()) if nbytes % 8 == 0 else (a.element_size(),)):
        try:
            iv = _INT_VIEW[width]
            return equal(a.view(iv), b.view(iv))
        except (KeyError, RuntimeError):  # unaligned, or no integer view of that width
            continue
    return False


def same(a, b):
    if bitwise_equal(a, b):
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        fa, fb = flat(a), flat(b)
        for i, j in spans(fa.numel()):
            x, y = fa[i:j], fb[i:j]
            if not (torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(), y.nan_to_num())):
                return False
        return True
    return equal(a, b)


class Comparing:
    """The judge's compare (a mixin of Judge: self is the Judge)."""

    # -- comparisons
    def compare(self, ref_out, outs, info, label, raise_on_fail=True, fast=False):
        """Returns None when the candidate's outputs pass, else a reason.
        fast (timed calls): one pass in the output's own dtype instead of
        the full float64 comparison; it still fails a cached or stale result."""
        refs = as_outputs(ref_out)
        self.last_miss = None  # (elements over their bound, the largest |diff| / bound)
        reason = self.handover_reason(info)
        if reason is None and len(outs) != len(refs):
            reason = "returned %d outputs, expected %d" % (len(outs), len(refs))
        elif reason is None:
            for i, (r, c) in enumerate(zip(refs, outs)):
                reason = self._compare_fast(r, c) if fast else self._compare_tensor(r, c)
                if reason:
                    reason = ("output %d: " % i if len(refs) > 1 else "") + reason
                    break
        self.evidence["trials"].append({"label": label, "ok": reason is None,
                                        **({"reason": reason} if reason else {})})
        if reason and raise_on_fail:
            raise Verdict("incorrect", "%s: %s" % (label, reason))
        return reason


    @staticmethod
    def handover_reason(info):
        """Why the call's outputs cannot be trusted whatever their values (a
        subclass, foreign storage, an alias of an input, a mutated input), or
        None."""
        if info["subclass"]:
            return "the output is a tensor subclass"
        if info["foreign_storage"]:
            return "the output does not own its storage (empty, null, or memory the " \
                   "allocator does not own, which may be freed or reused after the call)"
        if info["alias"]:
            return "the output aliases an input"
        if info["mutated"]:
            return "the candidate modified its input(s) %s" % info["mutated"]
        return None


    def _compare_fast(self, r, c):
        if not isinstance(r, torch.Tensor):
            return None
        if tuple(c.shape) != tuple(r.shape) or c.dtype != r.dtype or c.device.type == "meta":
            return self._compare_tensor(r, c)
        if c.device != r.device:
            c = c.to(r.device)
        # The same bytes as the reference's pass whatever the dtype (NaN
        # where it has NaN included), and read as integer words they are
        # checked in about half the time of torch.equal's float pass: 0.37
        # against 0.69 ms for 4 MB here, on every timed call of a model
        # that matches bit for bit (the reference runners always do).
        if bitwise_equal(c, r) or equal(c, r):
            return None
        if not (r.is_floating_point() or r.is_complex()):
            return "values differ (exact dtype %s)" % r.dtype
        atol, rtol = self.atol, self.rtol
        if r.dtype in (torch.float16, torch.bfloat16):
            atol = rtol = max(atol, self.low_precision_tol)
        atol_eff = atol * max(1.0, self._ref_rms(r))
        fr, fc = flat(r), flat(c)
        for i, j in spans(fr.numel()):
            if not torch.allclose(fc[i:j], fr[i:j], atol=atol_eff, rtol=rtol, equal_nan=True):
                return self._compare_tensor(r, c)  # the full check says why
        return None


    def _ref_rms(self, r):
        """_rms of a reference output the judge keeps (a timing set's): a
        float64 pass over the whole output, once per tensor instead of once
        per timed call (the reference outputs never change; keyed by the
        tensor's identity and storage address, and the tensor is held, so
        the key cannot be reused by another tensor)."""
        key = (id(r), r.data_ptr())
        got = self._rms_cache.get(key)
        if got is None:
            got = self._rms_cache[key] = (r, self._rms(r))
        return got[1]


    @staticmethod
    def _rms(r):
        n = r.numel()
        if n == 0:
            return 0.0
        return (sum_squares(r) / n) ** 0.5


    def _compare_tensor(self, r, c):
        """allclose with the profile's tolerances, in chunks (a KernelBench
        output can be gigabytes; float64 copies of it would not fit), plus
        the normalisations the reference implies, and, only where the whole
        output is below the absolute tolerance, a relative-norm check.

        One tolerance, the one it names (issue #47): an element passes when
        |out - ref| <= atol * max(1, rms(ref)) + rtol * |ref|, i.e.
        allclose(atol, rtol) with atol scaled by the output's RMS. Rounding
        error grows with the magnitude of what was summed, not of the
        result, so near-zero elements of a large-magnitude output (a matmul
        on [-32, 32] inputs) would otherwise fail every correct kernel that
        sums in another order. A relative-norm test on top (||out - ref|| <=
        rtol ||ref||) rejected a published kernel whose every element was
        within allclose (norm 1.44e-4); it now applies only where rms(ref)
        < atol, where the elementwise test cannot tell any output of that
        scale (zeros included) from the right one."""
        if not isinstance(r, torch.Tensor):
            return None
        if tuple(c.shape) != tuple(r.shape):
            return "shape %s, expected %s" % (list(c.shape), list(r.shape))
        if c.dtype != r.dtype:
            return "dtype %s, expected %s" % (c.dtype, r.dtype)
        if c.device.type == "meta":
            return "the output could not be handed over"
        if c.device != r.device:
            c = c.to(r.device)
        if not (r.is_floating_point() or r.is_complex()):
            if not equal(c, r):
                fc, fr = flat(c), flat(r)
                differ = sum(int((fc[i:j] != fr[i:j]).sum()) for i, j in spans(fr.numel()))
                self.mismatch = max(self.mismatch, differ / max(1, fr.numel()))
                return "values differ (exact dtype %s)" % r.dtype
            return None
        atol, rtol = self.atol, self.rtol
        if r.dtype in (torch.float16, torch.bfloat16):
            atol = rtol = max(atol, self.low_precision_tol)
        rflat, cflat = r.reshape(-1), c.reshape(-1)
        n = rflat.numel()
        if n == 0:
            return None
        if equal(rflat, cflat) and all_finite(rflat):
            return None  # identical: every check below passes
        sq_diff = 0.0
        rms = self._rms(r)
        sq_ref = rms * rms * n
        atol_eff = atol * max(1.0, rms)
        bad_total = 0
        max_diff = 0.0
        over = 0.0  # the largest |diff| / (its element's bound)
        for i, j in spans(n):
            rf = rflat[i:j].double()
            cf = cflat[i:j].double()
            finite = torch.isfinite(rf)
            if not torch.equal(torch.isfinite(cf), finite):
                return "non-finite values where the reference is finite (or vice versa)"
            if not torch.equal(torch.isnan(cf), torch.isnan(rf)):
                return "NaN pattern differs"
            if not bool(finite.all()) and not torch.equal(rf[~finite].nan_to_num(),
                                                          cf[~finite].nan_to_num()):
                return "infinities differ"
            rfz = torch.where(finite, rf, torch.zeros_like(rf))
            cfz = torch.where(finite, cf, torch.zeros_like(cf))
            diff = (cfz - rfz).abs()
            max_diff = max(max_diff, float(diff.max()))
            self.max_rel = max(self.max_rel, float((diff / rfz.abs().clamp_min(1e-12)).max()))
            bound = rfz.abs().mul_(rtol).add_(atol_eff)
            bad_total += int((diff > bound).sum())
            over = max(over, float((diff / bound.clamp_min_(1e-30)).max()))
            del bound
            sq_diff += float(diff.square().sum())
            del rf, cf, rfz, cfz, diff, finite
        self.max_abs = max(self.max_abs, max_diff)
        self.mismatch = max(self.mismatch, bad_total / n)
        self.last_miss = (bad_total, over)  # for a family's near miss (korch_families)
        if bad_total:
            return "max |diff| %.3g exceeds atol %.0e (x max(1, rms %.3g)) / rtol %.0e at %d of " \
                   "%d elements" % (max_diff, atol, rms, rtol, bad_total, n)
        if sq_ref > 0 and rms < atol:
            rel = (sq_diff / sq_ref) ** 0.5
            if rel > rtol:
                return "relative error norm %.3g > %.0e (||out-ref||/||ref||; the reference's " \
                       "output, rms %.3g, is below atol)" % (rel, rtol, rms)
        # Normalisation implied by the reference (softmax rows, unit vectors).
        # (A row at a time in float64: each block of rows is one chunk.)
        if r.dim() >= 1 and r.shape[-1] > 1 and all_finite(r):
            def row_sums(rows):
                return rows.double().sum(dim=-1)

            def row_norms(rows):
                return rows.double().square().sum(dim=-1).sqrt()
            rs = row_reduce(r, row_sums)
            if torch.allclose(rs, torch.ones_like(rs), atol=1e-4):
                cs = row_reduce(c, row_sums)
                if not torch.allclose(cs, torch.ones_like(cs), atol=max(1e-3, 10 * atol)):
                    return "rows do not sum to 1 as the reference's do"
            del rs
            rn = row_reduce(r, row_norms)
            if torch.allclose(rn, torch.ones_like(rn), atol=1e-4):
                cn = row_reduce(c, row_norms)
                if not torch.allclose(cn, torch.ones_like(cn), atol=max(1e-3, 10 * atol)):
                    return "rows are not unit-norm as the reference's are"
        return None
