"""Which failures the judge charges to the host, not the candidate
(Judge.infrastructure, issue #32). The end-to-end case, a process holding the
GPU's memory, is GpuEvaluatorCorpus.MemoryHeldByAnotherProcessIsRetriedNotCharged
on the GPU machine; here the rule itself, with no GPU."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_judge as kj  # noqa: E402

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a "
       "total capacity of 139.80 GiB of which 250.44 MiB is free.")


def judge(device="cuda", foreign_gib=0.0):
    j = kj.Judge({}, {"atol": 1e-4, "rtol": 1e-4, "low_precision_tol": 1e-2, "device": device})
    j.foreign_bytes = int(foreign_gib * 2**30)
    return j


class InfrastructureTest(unittest.TestCase):
    def test_oom_is_the_candidates_when_the_gpu_was_free(self):
        self.assertIsNone(judge(foreign_gib=0.5).infrastructure(OOM))

    def test_oom_is_the_hosts_when_others_held_memory(self):
        why = judge(foreign_gib=76.2).infrastructure(OOM)
        self.assertIn("outside this evaluation held 76.2 GiB", why)

    def test_a_runner_that_could_not_open_a_context_only_in_its_setup_reply(self):
        text = kj.RUNNER_INIT_FAILED + ": CUDA error: CUDA-capable device(s) is/are busy or unavailable"
        self.assertIn("could not open a CUDA context", judge().infrastructure(text, setup=True))
        # After setup the runner runs candidate code, which could say anything.
        self.assertIsNone(judge().infrastructure(text))
        self.assertIsNone(judge().infrastructure("Traceback ...\n" + text, setup=True))

    def test_other_errors_and_the_cpu_are_never_the_hosts(self):
        self.assertIsNone(judge(foreign_gib=80).infrastructure("RuntimeError: illegal memory access"))
        self.assertIsNone(judge(device="cpu", foreign_gib=80).infrastructure(OOM))

    def test_raise_carries_the_reason_to_the_result(self):
        with self.assertRaises(kj.Verdict) as c:
            judge(foreign_gib=10).raise_if_infrastructure(OOM)
        self.assertEqual(c.exception.verdict, "worker_crash")
        self.assertTrue(c.exception.error.startswith("infrastructure: "))
        self.assertIn("infrastructure", c.exception.evidence)


if __name__ == "__main__":
    unittest.main()
