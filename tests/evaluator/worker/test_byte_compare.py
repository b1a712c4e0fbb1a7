"""The byte paths of a timed CPU call (stop 58): korch_chunks.same_bytes (libc
memcmp of two contiguous CPU tensors), the bitwise_equal in front of every
timed output and input check, and korch_transport.write, which copies a
runner's contiguous outputs into its output region with memmove. Both ways:
equal bytes are equal, one changed byte anywhere is not, and a tensor whose
bytes are not its values (a view, a conjugate) takes the other path.

The oracle is numpy's bytes of each tensor, not the code under test."""
import mmap
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import torch  # noqa: E402

import korch_chunks as kch  # noqa: E402
import korch_compare as kc  # noqa: E402
import korch_transport as kt  # noqa: E402
from korch_chunks import same_bytes  # noqa: E402


def oracle_bytes(t):
    return t.contiguous().numpy().tobytes()


class SameBytes(unittest.TestCase):
    def setUp(self):
        g = torch.Generator().manual_seed(7)
        self.a = torch.randn(300, 77, generator=g)

    def test_equal_bytes_are_equal(self):
        b = self.a.clone()
        self.assertEqual(oracle_bytes(self.a), oracle_bytes(b))
        self.assertIs(same_bytes(self.a, b), True)
        self.assertTrue(kc.bitwise_equal(self.a, b))

    def test_one_changed_byte_anywhere_is_not_equal(self):
        raw = self.a.view(torch.uint8).reshape(-1)
        for pos in (0, 1, raw.numel() // 2, raw.numel() - 1):
            b = self.a.clone()
            braw = b.view(torch.uint8).reshape(-1)
            braw[pos] ^= 1
            self.assertNotEqual(oracle_bytes(self.a), oracle_bytes(b))
            self.assertIs(same_bytes(self.a, b), False, pos)
            self.assertFalse(kc.bitwise_equal(self.a, b), pos)

    def test_negative_zero_is_other_bytes_but_the_same_value(self):
        a = torch.zeros(64)
        b = -torch.zeros(64)
        self.assertIs(same_bytes(a, b), False)
        self.assertTrue(kc.same(a, b))  # the value test behind it

    def test_views_whose_bytes_are_not_their_values_go_the_other_way(self):
        t = self.a.t()
        self.assertIsNone(same_bytes(t, t.clone()))           # not contiguous
        self.assertTrue(kc.bitwise_equal(t, t.contiguous()))  # same values, compared as words
        c = torch.randn(16, dtype=torch.complex64)
        self.assertIsNone(same_bytes(c.conj(), c.conj()))     # conjugate bit
        self.assertIsNone(same_bytes(self.a, self.a.double()))
        self.assertIsNone(same_bytes(self.a, self.a.reshape(77, 300)))
        # A non-contiguous pair that differs in one element still differs.
        d = t.clone()
        d[3, 5] += 1
        self.assertFalse(kc.bitwise_equal(t, d))

    def test_empty_tensors_are_equal(self):
        self.assertIs(same_bytes(torch.empty(0), torch.empty(0)), True)


class SplitOnTwoCores(unittest.TestCase):
    """A comparison of korch_chunks.SPLIT_BYTES or more, half on the helper
    thread (korch_chunks.use_helper_cpu): a changed byte in either half, or
    at the seam, is seen."""

    def setUp(self):
        kch.use_helper_cpu(sorted(os.sched_getaffinity(0))[-1])
        g = torch.Generator().manual_seed(11)
        self.a = torch.randn(kch.SPLIT_BYTES // 4 + 4099, generator=g)  # (an odd size)

    def tearDown(self):
        kch.use_helper_cpu(None)

    def test_the_helper_is_used_and_both_halves_count(self):
        self.assertTrue(kch._HELPER)
        raw_n = self.a.numel() * 4
        half = (raw_n // 2) & ~63
        self.assertIs(same_bytes(self.a, self.a.clone()), True)
        for pos in (0, half - 1, half, half + 1, raw_n - 1):
            b = self.a.clone()
            b.view(torch.uint8)[pos] ^= 0x10
            self.assertNotEqual(oracle_bytes(self.a), oracle_bytes(b))
            self.assertIs(same_bytes(self.a, b), False, pos)
            self.assertIs(same_bytes(self.a, self.a.clone()), True, pos)  # the helper is free again

    def test_off_again_compares_on_one_thread(self):
        kch.use_helper_cpu(None)
        self.assertFalse(kch._HELPER)
        b = self.a.clone()
        b[-1] += 1
        self.assertIs(same_bytes(self.a, b), False)


class Write(unittest.TestCase):
    def test_contiguous_and_strided_tensors_land_where_the_header_says(self):
        g = torch.Generator().manual_seed(3)
        values = [torch.randn(33, 65, generator=g),              # contiguous: memmove
                  torch.randn(40, 24, generator=g).t(),          # transposed: copy_
                  7,
                  torch.arange(10, dtype=torch.int64)[::2],      # strided slice
                  torch.randn(8, dtype=torch.complex64).conj()]  # conjugate view
        header, total = kt.layout(values)
        buf = mmap.mmap(-1, total + 4096)
        buf.write(b"\xab" * len(buf))
        kt.write(buf, values, header)
        for v, h in zip(values, header):
            if h["t"] != "tensor":
                continue
            want = oracle_bytes(v.resolve_conj())
            got = buf[h["off"]:h["off"] + h["nbytes"]]
            self.assertEqual(got, want, h)
        # nothing past the last tensor was touched
        end = max(h["off"] + h["nbytes"] for h in header if h["t"] == "tensor")
        self.assertEqual(buf[end:end + 64], b"\xab" * 64)


if __name__ == "__main__":
    unittest.main()
