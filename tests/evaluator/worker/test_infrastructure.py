"""Which failures the judge charges to the host, not the candidate (issues
#32, #47): facts, never text. A runner's CUDA initialisation is a field of
its hello, sent before any candidate code reached it; an allocation failure
is the host's only when it happened in the judge's own process and the
judge's own reading of device memory at that moment shows memory held
outside the evaluation. Here the rules with the fake CUDA layer
(korch_device.DeviceMemory), no GPU; the corpus entries
hacks/fault_spoof_init.py and hacks/fault_oom_text.py attack them end to end
(CpuEvaluatorFaults in test_cpu_evaluator.cpp)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_device as kd  # noqa: E402
import korch_judge as kj  # noqa: E402

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a "
       "total capacity of 139.80 GiB of which 250.44 MiB is free.")
INIT_SPOOF = "CUDA initialisation failed before any candidate code ran: busy"


class FakeRunner:
    """The judge's end of a runner whose messages are given."""

    def __init__(self, name, messages):
        self.name = name
        self.messages = list(messages)
        self.sent = []
        self.ch = self
        self.protections = []

    def recv(self):
        return self.messages.pop(0), []

    def send(self, msg):
        self.sent.append(msg)


def judge(device="cpu", foreign_gib=None, foreign_now_gib=None):
    """A judge under the fake CUDA layer: `foreign_gib` held outside the
    evaluation at its start, `foreign_now_gib` (default the same) at the
    moment of a failure; None: no fake layer (a CPU judge)."""
    job = {"atol": 1e-4, "rtol": 1e-4, "low_precision_tol": 1e-2, "device": device}
    if foreign_gib is not None:
        job["fake_cuda"] = {"total_mb": 80 << 10, "foreign_mb": int(foreign_gib * 1024)}
    j = kj.Judge({}, job)
    j.note_foreign_memory()
    if foreign_now_gib is not None:
        j.device_memory.fake["foreign_mb"] = int(foreign_now_gib * 1024)
    return j


class HostFaultTest(unittest.TestCase):
    def test_the_fake_layer_reads_memory_held_at_the_start(self):
        j = judge(foreign_gib=10)
        self.assertTrue(j.device_memory.present)
        self.assertEqual(j.evidence["gpu_used_at_start_mb"], 10 << 10)
        self.assertAlmostEqual(j.foreign_bytes, (10 << 30) - 3 * kd.CONTEXT_ALLOWANCE)

    def test_the_judges_own_allocation_failure_with_memory_held_outside_is_the_hosts(self):
        why = judge(foreign_gib=76).host_allocation_fault(RuntimeError(OOM))
        self.assertIn("processes outside this evaluation held 73.0 GiB", why)
        with self.assertRaises(kj.Verdict) as c:
            judge(foreign_gib=10).raise_if_host_fault(MemoryError("alloc"))
        self.assertEqual(c.exception.verdict, "worker_crash")
        self.assertTrue(c.exception.error.startswith("infrastructure: "))
        self.assertIn("infrastructure", c.exception.evidence)

    def test_memory_must_be_held_outside_at_the_start_and_at_the_failure(self):
        # Free at the start: whatever holds memory now, candidate code may have taken it.
        self.assertIsNone(judge(foreign_gib=0.5, foreign_now_gib=70).host_allocation_fault(
            RuntimeError(OOM)))
        # Held at the start, released since: the failure is not the others'.
        self.assertIsNone(judge(foreign_gib=70, foreign_now_gib=0.5).host_allocation_fault(
            RuntimeError(OOM)))

    def test_a_failure_that_is_no_allocation_or_on_a_cpu_is_never_the_hosts(self):
        self.assertIsNone(judge(foreign_gib=80).host_allocation_fault(
            RuntimeError("illegal memory access")))
        self.assertIsNone(judge().host_allocation_fault(RuntimeError(OOM)))

    def test_a_runners_reply_is_never_the_hosts_whatever_it_says(self):
        j = judge(foreign_gib=76)
        for text in (OOM, INIT_SPOOF + "x" * 3900):
            with self.assertRaises(kj.Verdict) as c:
                j._check_reply(FakeRunner("candidate", []), {"ok": False, "error": text})
            self.assertEqual(c.exception.verdict, "runtime_error")
            self.assertNotIn("infrastructure", c.exception.evidence)
            with self.assertRaises(kj.Verdict) as c:
                j._setup_reply(FakeRunner("candidate", [{"ok": False, "error": text}]))
            self.assertEqual(c.exception.verdict, "runtime_error")
            self.assertNotIn("infrastructure", c.exception.evidence)

    def test_a_runners_init_failure_is_read_from_its_hello(self):
        j = judge(foreign_gib=0)
        ok = FakeRunner("candidate", [{"op": "hello", "cuda_init_error": None}])
        j._send_setup(ok, {"op": "setup"})
        self.assertEqual(ok.sent, [{"op": "setup"}])
        bad = FakeRunner("candidate", [{"op": "hello", "cuda_init_error": "device busy"}])
        with self.assertRaises(kj.Verdict) as c:
            j._send_setup(bad, {"op": "setup"})
        self.assertEqual(c.exception.verdict, "worker_crash")
        self.assertIn("could not open a CUDA context (device busy)", c.exception.error)
        self.assertEqual(bad.sent, [])  # the candidate's code is never sent


if __name__ == "__main__":
    unittest.main()
