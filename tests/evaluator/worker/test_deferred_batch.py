"""A deferred CPU batch (the replay probe's unseen sets): the batch's later
inputs reach the runner only after its untimed first call.

A CPU batch runs its first call untimed and times the rest. Were every set
of the batch in the runner's input region before that first call, a model
could compute the later calls there, out of every window, and read as fast
on unseen inputs as on seen ones: the replay probe would be blind to it
(tests/evaluator/corpus/hacks/rt_batch_lookahead.py read `ok` at 1.9x that
way, its probe ratio 1.01). So the judge writes only the first set into the
region and hands the others over in a memfd (Judge._later_memfd) that the
runner reads after the first call (korch_transport.read_later).

Here a spy model looks, during each call, at every slot of the input region
through the test's own mapping of it, and records what it finds. The oracle
is this file's: the sets' bytes. The control (the same batch, every set
written first) shows the spy does see ahead when it can."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import torch  # noqa: E402

import korch_judge  # noqa: E402
import korch_runner as kr  # noqa: E402
import korch_transport as kt  # noqa: E402

N = 4  # sets in the batch
STRIDE = 8192


def example_sets():
    g = torch.Generator().manual_seed(5)
    return [[torch.randn(33, 9, generator=g)] for _ in range(N)]


class Spy(torch.nn.Module):
    """On each call: which slots of the region hold their set now."""

    def __init__(self, region, headers, sets):
        super().__init__()
        self.region, self.headers, self.sets = region, headers, sets
        self.seen = []

    def forward(self, x):
        now = []
        for h, s in zip(self.headers, self.sets):
            at = kt.unpack([h], self.region.mm, copy=True)[0]
            now.append(torch.equal(at, s[0]))
        self.seen.append(now)
        return x * 2


class DeferredBatch(unittest.TestCase):
    def setUp(self):
        self.sets = example_sets()
        self.judge_in, judge_out = kt.Region(N * STRIDE), kt.Region(N * STRIDE)
        fds = [os.dup(self.judge_in.fd), os.dup(judge_out.fd)]
        self.judge_in.close_fd()
        judge_out.close_fd()
        kr.map_regions({"in_size": N * STRIDE, "out_size": N * STRIDE}, fds)
        self.judge_in.mm[:] = b"\xa5" * (N * STRIDE)  # what the slots held before
        self.headers = []
        for i, s in enumerate(self.sets):
            header, _ = kt.layout(s)
            self.headers.append(dict(header[0], off=header[0]["off"] + i * STRIDE + 64))

    def tearDown(self):
        kr._REGIONS.clear()

    def call(self, deferred):
        headers = [dict(h) for h in self.headers]
        fds = []
        if deferred:
            kt.write(self.judge_in.mm, self.sets[0], [headers[0]])
            fds.append(korch_judge.Judge._later_memfd(
                [(s, [h]) for s, h in zip(self.sets[1:], headers[1:])]))
        else:
            for s, h in zip(self.sets, headers):
                kt.write(self.judge_in.mm, s, [h])
        spy = Spy(self.judge_in, headers, self.sets)
        open_before = len(os.listdir("/proc/self/fd"))
        reply, _, _, _ = kr._call_cpu(spy, {"op": "call", "args": headers, "batch": N, "region": True,
                                            **({"later": True} if deferred else {})}, fds)
        self.assertEqual(len(os.listdir("/proc/self/fd")), open_before - len(fds),
                         "the runner closes the later inputs' memfd")
        self.assertTrue(reply["ok"])
        outs = kt.unpack(reply["outputs"], kr._REGIONS["out"].mm, copy=True)
        for s, o in zip(self.sets, outs):  # every call computed on its own set
            self.assertTrue(torch.equal(o, s[0] * 2))
        return spy.seen

    def test_the_first_call_sees_only_its_own_set(self):
        seen = self.call(deferred=True)
        self.assertEqual(seen[0], [True] + [False] * (N - 1))
        for later in seen[1:]:  # the timed calls find every set in place
            self.assertEqual(later, [True] * N)

    def test_control_written_first_the_first_call_sees_every_set(self):
        seen = self.call(deferred=False)
        self.assertEqual(seen[0], [True] * N)

    def test_later_inputs_outside_their_memfd_or_region_are_refused(self):
        headers = [dict(h) for h in self.headers]
        fd = korch_judge.Judge._later_memfd([(s, [h]) for s, h in zip(self.sets[1:], headers[1:])])
        size = os.fstat(fd).st_size
        for bad in (dict(headers[1], later=size), dict(headers[1], later=-64),
                    dict(headers[1], off=N * STRIDE)):
            with self.assertRaises(ValueError):
                kt.read_later([bad], fd, kr._REGIONS["in"])
        os.close(fd)

    def test_a_later_call_without_its_memfd_is_refused(self):
        with self.assertRaises(ValueError):
            kr._call_cpu(Spy(self.judge_in, self.headers, self.sets),
                         {"op": "call", "args": self.headers, "batch": N, "region": True,
                          "later": True}, [])


if __name__ == "__main__":
    unittest.main()
