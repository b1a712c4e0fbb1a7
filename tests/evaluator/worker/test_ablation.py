"""The runner's ablation (korch_runner._ablated_call) both ways, and its
memory: a kernel's outputs are poisoned whatever their size, what it did
not write is left alone, and a large task does not need a copy of every
argument (issue #47: L1/19 ReLU's 6 GiB input and output ran out of memory
on an 80 GB H100 in the ablation's copies)."""
import os
import resource
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py")
sys.path.insert(0, PY)

import torch  # noqa: E402

import korch_runner as kr  # noqa: E402

BIG = (kr._SNAPSHOT_COPY_BYTES // 4) + 1000  # float32 elements: above the copy limit


def all_nan(t):
    return bool(torch.isnan(t).all())


class BothWays(unittest.TestCase):
    def check_out_param(self, n):
        x = torch.randn(n)
        out = torch.zeros(n)
        r = kr._ablated_call(lambda a, o: torch.clamp(a, min=0, out=o), (x, out), {})
        self.assertTrue(all_nan(out), "a written out-parameter is poisoned")
        self.assertFalse(torch.isnan(x).any(), "an input the kernel only read is left alone")
        self.assertTrue(all_nan(r))

    def test_small_and_large_out_parameters_are_poisoned(self):
        self.check_out_param(1000)
        self.check_out_param(BIG)

    def test_one_changed_element_of_a_large_argument_is_seen(self):
        out = torch.zeros(BIG)

        def kernel(o):
            o[BIG // 2 + 7] = 1.0
        kr._ablated_call(kernel, (out,), {})
        self.assertTrue(all_nan(out))

    def test_a_large_argument_left_as_it_was_is_not_poisoned(self):
        x = torch.randn(BIG)
        keep = x.clone()

        def kernel(a):
            a.mul_(1.0)  # written, same values: unchanged, as torch.equal would say
        kr._ablated_call(kernel, (x,), {})
        self.assertTrue(torch.equal(x, keep))

    def test_integer_and_byte_outputs(self):
        for dtype, fill in ((torch.int32, 0x5A5A), (torch.uint8, 0x5A), (torch.int64, 0x5A5A)):
            out = torch.zeros(BIG // 2 if dtype != torch.uint8 else BIG * 4, dtype=dtype)
            kr._ablated_call(lambda o: o.fill_(3), (out,), {})
            self.assertTrue(bool((out == fill).all()), dtype)

    def test_a_large_fresh_result_is_poisoned_and_an_aliased_one_is_a_copy(self):
        x = torch.randn(BIG)
        r = kr._ablated_call(lambda a: a * 2, (x,), {})
        self.assertTrue(all_nan(r))
        self.assertFalse(torch.isnan(x).any())
        keep = x.clone()
        r = kr._ablated_call(lambda a: a, (x,), {})  # returns its argument untouched
        self.assertTrue(all_nan(r))
        self.assertTrue(torch.equal(x, keep), "the argument behind an aliased result is not written")

    def test_a_small_result_that_is_the_models_own_state_is_not_written(self):
        buf = torch.randn(100)
        keep = buf.clone()
        r = kr._ablated_call(lambda: buf, (), {})
        self.assertTrue(all_nan(r))
        self.assertTrue(torch.equal(buf, keep))


PEAK = textwrap.dedent("""
    import resource, sys, torch
    sys.path.insert(0, %r)
    import korch_runner as kr
    n = (256 << 20) // 4
    x = torch.randn(n); out = torch.empty(n); out.fill_(1.0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kr._ablated_call(lambda a, o: torch.clamp(a, min=0, out=o), (x, out), {})
    assert bool(torch.isnan(out).all())
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
""") % PY


class Memory(unittest.TestCase):
    def test_ablation_of_large_arguments_needs_no_copy_of_them(self):
        # 256 MiB in, 256 MiB out: copies would add 512 MiB (and a poisoned
        # copy 256 MiB more); the digest needs a few chunks of int64.
        got = subprocess.run([sys.executable, "-c", PEAK], capture_output=True, text=True, timeout=120)
        self.assertEqual(got.returncode, 0, got.stderr)
        grew = int(got.stdout.strip().splitlines()[-1])
        self.assertLess(grew, 160 << 20, "peak grew by %.0f MiB" % (grew / 2**20))


if __name__ == "__main__":
    unittest.main()
