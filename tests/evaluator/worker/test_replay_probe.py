"""The replay probe's decision (korch_replay.ReplayProbe.replay_probe) both
ways, on injected call times: a candidate is impossible_timing only when two
probes, on different unseen inputs, each find its unseen/seen ratio over
REPLAY_FACTOR x the reference's. One noisy probe is not a verdict (the card's
honest h_squareddiff_init read 2.1x once, stop 55); a replay is caught on
every probe, and a candidate that replays only some of the time still is
when both probes see it.

The oracle is this file's own arithmetic: medians of the injected times."""
import os
import statistics
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_replay as kr  # noqa: E402
from korch_verdict import Verdict  # noqa: E402


class FakeJudge(kr.ReplayProbe):
    """A judge whose probe calls return scripted times: times[(probe, side,
    which)] is the list of per-round times of that probe (0 or 1)."""
    dev = "cpu"
    seed = 7
    set_bytes = 1
    budget = 1 << 30
    refr, cand = object(), object()

    def __init__(self, times, job=None):
        self.job = job or {}
        self.evidence = {}
        self.times = times
        self.calls = []
        self.tags = []

    def gen_inputs(self, seed):
        self.tags.append(seed)
        return ["set", seed]

    def ref_forward(self, s):
        return ["out"]

    def _probe_call(self, runner, side, idx, sets, refs, flush, label):
        which = "seen" if idx is not None else "unseen"
        probe, r = divmod(self.calls.count((side, which)), kr.REPLAY_ROUNDS)
        self.calls.append((side, which))
        return self.times[(probe, "ref" if runner is self.refr else "cand", which)][r]


def flat(ns):
    return [ns] * kr.REPLAY_ROUNDS


def honest(probe=0, cand_unseen=20_000):
    return {(probe, "ref", "seen"): flat(30_000), (probe, "ref", "unseen"): flat(30_000),
            (probe, "cand", "seen"): flat(20_000), (probe, "cand", "unseen"): flat(cand_unseen)}


class ReplayProbe(unittest.TestCase):
    def test_an_honest_candidate_takes_one_probe(self):
        j = FakeJudge(honest())
        out = j.replay_probe([["a"], ["b"]], [None, None], 1, False)
        self.assertTrue(out["run"])
        self.assertNotIn("again", out)
        self.assertNotIn("first_only", out)
        self.assertEqual(len(j.calls), 4 * kr.REPLAY_ROUNDS)
        # the trial's count: the candidate's seen and unseen calls
        self.assertEqual(out["calls"], 2 * kr.REPLAY_ROUNDS)
        self.assertAlmostEqual(out["candidate_ratio"], 1.0)

    def test_rounds_run_between_blocks_are_the_first_probes(self):
        # Timing.time_both runs rounds between its blocks; replay_probe runs
        # the rest, and the probe is the same six rounds
        j = FakeJudge(honest())
        sets = [["a"], ["b"]]
        first = j.replay_start(sets)
        for b in (2, 4):
            j.replay_round(first, sets, [None, None], 1, False, block=b)
        self.assertEqual(len(j.calls), 4 * 2)
        out = j.replay_probe(sets, [None, None], 1, False, first)
        self.assertEqual(len(j.calls), 4 * kr.REPLAY_ROUNDS)
        self.assertEqual(out["at_blocks"], [2, 4] + [None] * (kr.REPLAY_ROUNDS - 2))
        self.assertEqual(len(set(j.tags)), kr.REPLAY_ROUNDS)  # one unseen set a round
        self.assertIsNone(FakeJudge(honest(), {"replay_rounds": 0}).replay_start(sets))

    def test_one_noisy_probe_is_not_a_verdict(self):
        # the first probe: the candidate's unseen median 2.1x its seen one
        # (the card's false rejection); the second: 1.0x
        noisy = [20_000, 44_000, 41_000, 43_000, 45_000, 19_000]
        times = {**honest(0), (0, "cand", "unseen"): noisy, **honest(1)}
        self.assertGreater(statistics.median(noisy) / 20_000, 2 * 1.0)
        j = FakeJudge(times)
        out = j.replay_probe([["a"], ["b"]], [None, None], 1, False)
        self.assertIn("again", out)
        self.assertAlmostEqual(out["candidate_ratio"], statistics.median(noisy) / 20_000)
        self.assertAlmostEqual(out["again"]["candidate_ratio"], 1.0)
        # not a verdict, but the timing is distrusted and measured again by
        # fresh processes (korch_timing.timing_health)
        self.assertTrue(out["first_only"])
        self.assertEqual(out["calls"], 2 * 2 * kr.REPLAY_ROUNDS)
        # the second probe's unseen inputs are new ones, not the first's
        first = [t for t in j.tags if t is not None][:kr.REPLAY_ROUNDS]
        second = [t for t in j.tags if t is not None][kr.REPLAY_ROUNDS:]
        self.assertEqual(len(second), kr.REPLAY_ROUNDS)
        self.assertFalse(set(first) & set(second))

    def test_a_replay_over_the_factor_in_both_probes_is_impossible_timing(self):
        # a replay: 5x slower on every unseen set (the GPU corpus's
        # replay_content_key read 5.2x)
        times = {**honest(0, 100_000), **honest(1, 100_000)}
        j = FakeJudge(times)
        with self.assertRaises(Verdict) as v:
            j.replay_probe([["a"], ["b"]], [None, None], 1, False)
        self.assertEqual(v.exception.verdict, "impossible_timing")
        self.assertIn("again", j.evidence["replay_probe"])

    def test_a_replay_just_over_the_factor_is_still_caught(self):
        # 2.2x over a reference at 1.0x in both probes: over the factor twice
        times = {**honest(0, 44_000), **honest(1, 44_000)}
        with self.assertRaises(Verdict):
            FakeJudge(times).replay_probe([["a"], ["b"]], [None, None], 1, False)

    def test_the_reference_slower_on_unseen_inputs_excuses_the_candidate_alike(self):
        # both sides 2.5x slower on unseen sets (cold memory): an honest model
        times = {}
        for p in (0, 1):
            times.update({(p, "ref", "seen"): flat(30_000), (p, "ref", "unseen"): flat(75_000),
                          (p, "cand", "seen"): flat(20_000), (p, "cand", "unseen"): flat(50_000)})
        out = FakeJudge(times).replay_probe([["a"], ["b"]], [None, None], 1, False)
        self.assertNotIn("again", out)


if __name__ == "__main__":
    unittest.main()
