"""The judge's device: its own reading of the GPU's memory, the faults it
charges to the host from those readings (issues #32, #47), and its memory
bound. A mixin of korch_judge.Judge; facts, never the text of a runner's
reply (a runner runs candidate code)."""
import torch

import korch_chunks
import korch_transport as kt
from korch_tasks import as_outputs, nbytes_of
from korch_verdict import Verdict, out_of_memory

# GPU memory an evaluation's own CUDA processes (the judge and its runners)
# may hold before the judge has allocated anything: one CUDA context each, with
# room to spare (a torch context on the H200 is ~0.5 GB; see docs/gpu.md).
CONTEXT_ALLOWANCE = 1 << 30
# Held by processes outside the evaluation, from this much on an allocation
# that failed in the judge's own process is charged to them (issue #32).
FOREIGN_MEMORY_MIN = 1 << 30


class DeviceMemory:
    """The judge's own reading of device memory: (free, total) bytes of the
    GPU and what the judge itself holds there. The test-only fake CUDA layer
    (job["fake_cuda"], from KORCH_FAKE_CUDA in cpu mode) stands for a GPU of
    total_mb of which processes outside the evaluation hold foreign_mb, so
    that cpu mode runs the GPU's fault rules (issue #47)."""

    def __init__(self, dev, fake):
        self.dev = dev
        self.fake = fake if isinstance(fake, dict) else None

    @property
    def present(self):
        return self.dev != "cpu" or self.fake is not None

    def info(self):
        if self.fake is not None:
            total = int(self.fake.get("total_mb", 81559)) << 20
            return max(0, total - (int(self.fake.get("foreign_mb", 0)) << 20)), total
        return torch.cuda.mem_get_info()

    def own(self):
        """Device bytes the judge's process holds: torch's cache and the
        exchange buffers (kt.DeviceBuffers)."""
        if self.fake is not None:
            return 0
        return torch.cuda.memory_reserved() + kt.DeviceBuffers.total


class DeviceFacts:
    """The judge's device facts (a mixin of Judge: self is the Judge)."""

    def note_foreign_memory(self):
        """Device memory in use before this evaluation allocated anything,
        less one context allowance per process of the evaluation: what other
        processes on the host hold (evidence gpu_used_at_start_mb)."""
        if not self.device_memory.present:
            return
        try:
            free, total = self.device_memory.info()  # the judge's own context
        except RuntimeError as ex:  # no candidate code has run yet: the host's fault
            raise Verdict("worker_crash", "infrastructure: the judge could not open a CUDA "
                          "context: %s" % str(ex)[:300],
                          infrastructure="the GPU had no room for a CUDA context (%s)" % str(ex)[:200])
        used = total - free
        self.foreign_bytes = max(0, used - self._evaluation_processes() * CONTEXT_ALLOWANCE)
        self.evidence["gpu_used_at_start_mb"] = used >> 20
        self.evidence["gpu_total_mb"] = total >> 20

    def _evaluation_processes(self):
        return 1 + 2 + len(self.ctx.get("ref_more", [])) + len(self.ctx.get("cand_more", []))

    def host_allocation_fault(self, ex):
        """Why an allocation that failed in the judge's own process is the
        host's, or None (issue #47). Facts, not text: `ex` is an exception
        raised in this process, which runs no candidate code, and the judge
        reads the device's memory itself at the moment of failure. Memory
        held outside the evaluation is the lesser of what was held at its
        start, before any candidate code ran (a candidate cannot raise it),
        and what is held now beyond the judge's own and the contexts (it must
        still be held). A failure reported by a runner -- candidate code ran
        there -- is never the host's, whatever its text says."""
        if not self.device_memory.present or not out_of_memory(ex):
            return None
        try:
            free, total = self.device_memory.info()
            own = self.device_memory.own()
        except Exception:  # noqa: BLE001 - no reading: no fact to blame the host with
            return None
        now = max(0, total - free - own - self._evaluation_processes() * CONTEXT_ALLOWANCE)
        foreign = min(self.foreign_bytes, now)
        self.evidence["gpu_used_at_failure_mb"] = (total - free) >> 20
        if foreign < FOREIGN_MEMORY_MIN:
            return None
        return ("a GPU allocation of the judge failed while processes outside this evaluation "
                "held %.1f GiB of the GPU" % (foreign / 2**30))

    def raise_if_host_fault(self, ex):
        why = self.host_allocation_fault(ex)
        if why:
            raise Verdict("worker_crash", "infrastructure: " + why, infrastructure=why,
                          traceback=str(ex)[-4000:])

    # The judge's peak device memory, as a multiple of one input set and its
    # outputs (F = inputs + outputs), plus the chunks of its whole-tensor
    # tests (korch_chunks): the first set and its reference output (1 F),
    # the exchange buffers the runners read and write (1 F), the set in hand
    # (a trial's, a family's: 1 F) and, where a family fails, the reference
    # on that set perturbed (1 F). Inputs are freed between trials and
    # families; the timing's sets come after the first set is freed (at most
    # budget / 2F of them, two at least: 2 F). test_judge_memory measures it
    # on the CPU. docs/gpu.md, "The judge's memory".
    MEMORY_MULTIPLE = 4
    CHUNK_TEMPORARIES = 16  # float64 chunks alive at once, at most

    def memory_bound(self, set_bytes):
        return self.MEMORY_MULTIPLE * set_bytes + self.CHUNK_TEMPORARIES * 8 * korch_chunks.CHUNK

    def check_fits(self, first, first_ref):
        """GPU: `task_too_large` before any candidate code runs when the
        judge's bound (memory_bound) and one reference and one candidate
        runner's outputs, with a context for each process, exceed the
        device -- never a verdict on the candidate's code."""
        out_bytes = nbytes_of(as_outputs(first_ref))
        bound = self.memory_bound(nbytes_of(first) + out_bytes)
        self.evidence["judge_memory_bound_bytes"] = bound
        if not self.device_memory.present:
            return
        _, total = self.device_memory.info()
        # (The judge and one runner a side: further runners take part only
        # where they fit beside it, and the others leave before any call.
        # A runner's ablation keeps a digest, not a copy, of a large argument
        # (korch_runner._snapshot): its scratch, under 100 MiB, is inside the
        # runner's context allowance.)
        need = bound + 2 * out_bytes + 3 * CONTEXT_ALLOWANCE
        self.evidence["device_bytes_needed"] = need
        if need > total:
            raise Verdict("task_too_large", "the evaluation needs %.1f GiB of the GPU's %.1f GiB: "
                          "the judge %d x (inputs + outputs) = %.1f GiB, the runners' outputs and "
                          "the CUDA contexts" % (need / 2**30, total / 2**30, self.MEMORY_MULTIPLE,
                                                 bound / 2**30))
