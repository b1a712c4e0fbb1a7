"""The timed calls' compare (korch_compare.Comparing.compare, fast=True),
both ways. Outputs with the reference's very bytes pass at once, NaN in the
same places included; outputs that are equal but not the same bytes (-0.0
against 0.0) and outputs within the tolerance still pass by the float
checks behind it; a stale output, one wrong element, or a NaN where the
reference has a number fail.

The oracle is this file's own: each case is built to be what it says."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import torch  # noqa: E402

import korch_compare as kc  # noqa: E402
from korch_verdict import Verdict  # noqa: E402

PLAIN = {"subclass": False, "foreign_storage": False, "alias": False, "mutated": []}


class Judge(kc.Comparing):
    def __init__(self):
        self.atol = self.rtol = 1e-4
        self.low_precision_tol = 1e-2
        self.evidence = {"trials": []}
        self._rms_cache = {}
        self.max_abs = self.max_rel = 0.0
        self.mismatch = 0.0
        self.last_miss = None


def reason(ref, out):
    j = Judge()
    try:
        return j.compare(ref, [out], dict(PLAIN), "timed call 1", fast=True)
    except Verdict as v:
        return str(v)


class FastCompare(unittest.TestCase):
    device = "cpu"

    def setUp(self):
        g = torch.Generator().manual_seed(5)
        self.ref = torch.randn(256, 33, generator=g).to(self.device)

    def test_the_same_bytes_pass(self):
        self.assertIsNone(reason(self.ref, self.ref.clone()))

    def test_the_same_bytes_with_nan_pass(self):
        ref = self.ref.clone()
        ref[3, 4] = float("nan")
        self.assertIsNone(reason(ref, ref.clone()))

    def test_negative_zero_against_zero_passes(self):
        ref = self.ref.clone()
        ref[0, :] = 0.0
        out = ref.clone()
        out[0, :] = -0.0
        self.assertIsNone(reason(ref, out))

    def test_within_the_tolerance_passes(self):
        self.assertIsNone(reason(self.ref, self.ref * (1 + 1e-6)))

    def test_a_stale_output_fails(self):
        self.assertIsNotNone(reason(self.ref, torch.randn(256, 33, device=self.device)))

    def test_one_wrong_element_fails(self):
        out = self.ref.clone()
        out[100 // 33, 100 % 33] += 1.0
        self.assertIsNotNone(reason(self.ref, out))

    def test_nan_where_the_reference_has_a_number_fails(self):
        out = self.ref.clone()
        out[7, 7] = float("nan")
        self.assertIsNotNone(reason(self.ref, out))

    def test_integers_must_match_exactly(self):
        ref = torch.arange(1000, dtype=torch.int64, device=self.device)
        self.assertIsNone(reason(ref, ref.clone()))
        out = ref.clone()
        out[999] += 1
        self.assertIsNotNone(reason(ref, out))

    def test_an_odd_sized_half_precision_output(self):
        ref = self.ref[:5, :3].to(torch.float16).contiguous()  # 30 bytes: no 8-byte words
        self.assertIsNone(reason(ref, ref.clone()))
        out = ref.clone()
        out[0, 0] += 1
        self.assertIsNotNone(reason(ref, out))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class FastCompareCuda(FastCompare):
    """The same cases on the GPU judge's tensors (run on the GPU machine)."""
    device = "cuda"


if __name__ == "__main__":
    unittest.main()
