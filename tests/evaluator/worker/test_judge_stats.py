"""The judge's statistics, on synthetic raw times (no worker, no sandbox).

These are the numbers a verdict rests on: the speedup, its block-bootstrap
interval, and the cross-checks that turn hidden work into impossible_timing.
"""
import math
import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_judge as kj  # noqa: E402


def judge(device="cpu"):
    # The tolerance fields every job carries (korch's strict profile).
    job = {"device": device, "atol": 1e-4, "rtol": 1e-4, "low_precision_tol": 1e-2, "allow_tf32": False}
    j = kj.Judge({"protections": []}, job)
    j.seed = 7
    return j


def blocks(rng, n_blocks, per_block, mean_ns, sd_frac, drift=0.0):
    out = []
    for b in range(n_blocks):
        level = mean_ns * (1 + drift * (b % 3 - 1))
        out.append([int(rng.gauss(level, sd_frac * mean_ns)) for _ in range(per_block)])
    return out


class Interval(unittest.TestCase):
    def test_equal_work_interval_contains_one(self):
        rng = random.Random(1)
        s = {"ref": blocks(rng, 20, 5, 100_000, 0.02), "cand": blocks(rng, 20, 5, 100_000, 0.02)}
        lo, hi, point = judge()._interval(s, 1000)
        self.assertLess(abs(point - 1.0), 0.02)
        self.assertLessEqual(lo, 1.0)
        self.assertGreaterEqual(hi, 1.0)

    def test_real_speedup_interval_excludes_one(self):
        rng = random.Random(2)
        s = {"ref": blocks(rng, 20, 5, 200_000, 0.02), "cand": blocks(rng, 20, 5, 100_000, 0.02)}
        lo, hi, point = judge()._interval(s, 1000)
        self.assertAlmostEqual(point, 2.0, delta=0.05)
        self.assertGreater(lo, 1.5)
        self.assertLess(hi, 2.5)

    def test_drift_between_blocks_widens_the_interval(self):
        rng = random.Random(3)
        calm = {"ref": blocks(rng, 20, 5, 100_000, 0.01), "cand": blocks(rng, 20, 5, 100_000, 0.01)}
        rng = random.Random(3)
        drifting = {"ref": blocks(rng, 20, 5, 100_000, 0.01, drift=0.05),
                    "cand": blocks(random.Random(4), 20, 5, 100_000, 0.01, drift=-0.05)}
        lo1, hi1, _ = judge()._interval(calm, 1000)
        lo2, hi2, _ = judge()._interval(drifting, 1000)
        self.assertGreater(hi2 - lo2, hi1 - lo1)


class CrossCheck(unittest.TestCase):
    def extra(self, t, rt, host=None, sync=None, n=20, cpu_out=None):
        return [(t, rt, host, sync, cpu_out)] * n

    def test_equal_overheads_pass(self):
        j = judge("cuda")
        j._cross_check({"ref": self.extra(100_000, 180_000, 110_000, 120_000),
                        "cand": self.extra(90_000, 170_000, 100_000, 110_000)}, 90_000)

    def test_side_stream_work_is_impossible_timing(self):
        j = judge("cuda")
        # The events on the current stream see 5 us; a device-wide sync sees 2 ms.
        with self.assertRaises(kj.Verdict) as cm:
            j._cross_check({"ref": self.extra(2_000_000, 2_100_000, 2_010_000, 2_020_000),
                            "cand": self.extra(5_000, 2_100_000, 15_000, 2_010_000)}, 5_000)
        self.assertEqual(cm.exception.verdict, "impossible_timing")

    def test_host_side_wait_is_impossible_timing(self):
        j = judge("cuda")
        with self.assertRaises(kj.Verdict) as cm:
            j._cross_check({"ref": self.extra(2_000_000, 2_100_000, 2_010_000, 2_020_000),
                            "cand": self.extra(5_000, 2_100_000, 2_000_000, 2_010_000)}, 5_000)
        self.assertEqual(cm.exception.verdict, "impossible_timing")

    def test_cpu_work_outside_the_window_is_impossible_timing(self):
        # CPU: the runner's own CPU time outside its window (a busy host's
        # preemption inflates the wall-clock round trip, not this).
        j = judge("cpu")
        with self.assertRaises(kj.Verdict):
            j._cross_check({"ref": self.extra(1_000_000, 1_300_000, cpu_out=250_000),
                            "cand": self.extra(10_000, 9_000_000, cpu_out=8_900_000)}, 10_000)
        j._cross_check({"ref": self.extra(1_000_000, 1_300_000, cpu_out=250_000),
                        "cand": self.extra(900_000, 1_250_000, cpu_out=240_000)}, 900_000)
        # preempted between window and reply: a long wall gap, no CPU in it
        j._cross_check({"ref": self.extra(150_000, 650_000, cpu_out=60_000),
                        "cand": self.extra(1_100_000, 4_000_000, cpu_out=70_000)}, 1_100_000)



class ProcessSpread(unittest.TestCase):
    """Two runners a side (same model, same inputs, two processes): their
    medians' ratio widens the interval (issue #7)."""

    @staticmethod
    def spread(ref_blocks, ref_of, n_ref, cand_blocks, cand_of, n_cand):
        return kj.Judge._process_spread({"ref": ref_blocks, "cand": cand_blocks},
                                        ref_of, n_ref, cand_of, n_cand)

    def test_one_runner_a_side_gives_no_spread(self):
        self.assertIsNone(self.spread([[100]] * 4, [0] * 4, 1, [[90]] * 4, [0] * 4, 1))

    def test_spread_is_the_log_ratio_of_the_reference_runners_medians(self):
        ref_blocks = [[100_000] * 5] * 4 + [[104_000] * 5] * 4
        p = self.spread(ref_blocks, [0] * 4 + [1] * 4, 2, [[90_000] * 5] * 8, [0] * 8, 1)
        self.assertEqual(p["reference_medians_ns"], [100_000, 104_000])
        self.assertAlmostEqual(p["log_ratio"], math.log(100_000 / 104_000))
        self.assertNotIn("candidate_medians_ns", p)
        # var(log ratio of two processes) = 2 s^2; with one candidate runner
        # the speedup carries s^2 (1/2 + 1) = 1.5 s^2
        self.assertAlmostEqual(p["rel_sd"], math.sqrt(0.75) * abs(math.log(100 / 104)))

    def test_two_candidate_runners_share_the_estimate_and_the_speedup_carries_less(self):
        ref_blocks = [[100_000] * 5] * 8
        ref_of = [0, 0, 0, 0, 1, 1, 1, 1]
        cand_blocks = [[50_000] * 5] * 4 + [[53_000] * 5] * 4
        cand_of = [0, 0, 0, 0, 1, 1, 1, 1]
        p = self.spread(ref_blocks, ref_of, 2, cand_blocks, cand_of, 2)
        self.assertEqual(p["reference_medians_ns"], [100_000, 100_000])
        self.assertEqual(p["candidate_medians_ns"], [50_000, 53_000])
        d_c = math.log(50 / 53)
        self.assertAlmostEqual(p["candidate_log_ratio"], d_c)
        # s^2 = mean(d^2) / 2 over both sides' ratios (0 and d_c); the
        # speedup pools two processes a side: s^2 (1/2 + 1/2)
        self.assertAlmostEqual(p["rel_sd"], math.sqrt((0 + d_c * d_c) / 2 / 2))
        # the same spread seen by one candidate runner alone widens more
        one = self.spread(cand_blocks, cand_of, 2, [[100_000] * 5] * 8, [0] * 8, 1)
        self.assertGreater(one["rel_sd"], p["rel_sd"])

    def test_four_runners_a_side_pool_the_sample_variance(self):
        # GPU: four processes a side; sigma^2 is the pooled sample variance
        # of the log medians (dof 3 + 3), the speedup carries sigma^2 (1/4 + 1/4)
        ref_meds, cand_meds = [3800, 3900, 3750, 3850], [3870, 3800, 3930, 3840]
        ref_of = [b % 4 for b in range(16)]
        cand_of = [(b + 1) % 4 for b in range(16)]
        p = self.spread([[ref_meds[r]] * 5 for r in ref_of], ref_of, 4,
                        [[cand_meds[c]] * 5 for c in cand_of], cand_of, 4)
        self.assertEqual(p["reference_medians_ns"], ref_meds)
        self.assertEqual(p["candidate_medians_ns"], cand_meds)
        ss = 0.0
        for meds in (ref_meds, cand_meds):
            logs = [math.log(m) for m in meds]
            ss += sum((x - sum(logs) / 4) ** 2 for x in logs)
        self.assertAlmostEqual(p["process_rel_sd"], math.sqrt(ss / 6))
        self.assertAlmostEqual(p["rel_sd"], math.sqrt(ss / 6 * 0.5))

    def test_a_runner_that_never_timed_gives_no_spread_for_its_side(self):
        p = self.spread([[100] * 5] * 4, [0, 1, 2, 0], 4, [[90] * 5] * 4, [0, 1, 0, 1], 2)
        self.assertNotIn("reference_medians_ns", p)
        self.assertEqual(p["candidate_medians_ns"], [90, 90])

    def test_identical_runners_leave_the_interval_as_it_was(self):
        for dof in (None, 2, 6):
            lo, hi, ts = kj.widen(1.01, 0.99, 1.03, 0.0, dof)
            self.assertAlmostEqual(lo, 0.99)
            self.assertAlmostEqual(hi, 1.03)
            self.assertEqual(ts, [1.96, 1.96])

    def test_spread_widens_both_sides_in_quadrature(self):
        lo, hi, _ = kj.widen(1.0, 0.99, 1.01, 0.02)
        z = 1.96 * 0.02
        self.assertAlmostEqual(math.log(lo), -math.hypot(math.log(0.99), z))
        self.assertAlmostEqual(math.log(hi), math.hypot(math.log(1.01), z))
        self.assertLess(lo, 0.99)
        self.assertGreater(hi, 1.01)
        # a real 2x speedup stays clear of 1.0 with a 2% process spread
        lo2, _, _ = kj.widen(2.0, 1.95, 2.05, 0.02)
        self.assertGreater(lo2, 1.8)

    def test_a_spread_from_few_processes_takes_students_t(self):
        # the process term alone (a zero-width bootstrap): the half-width is
        # t(dof) * rel_sd, as for a mean of few samples
        for dof, t in ((2, 4.303), (6, 2.447), (30, 2.042)):
            lo, hi, ts = kj.widen(1.0, 1.0, 1.0, 0.02, dof)
            self.assertAlmostEqual(ts[0], t)
            self.assertAlmostEqual(math.log(hi), t * 0.02)
            self.assertAlmostEqual(math.log(lo), -t * 0.02)
        # a wide bootstrap next to a small process term: many effective dof,
        # t close to 1.96 (Welch-Satterthwaite), never below it
        _, _, ts = kj.widen(1.0, 0.9, 1.1, 0.001, 2)
        self.assertLess(ts[1], 1.97)
        self.assertGreaterEqual(ts[1], 1.96)
        # equal terms with 6 dof: (2v)^2 / (v^2 / 6) = 24 effective dof
        h = 1.96 * 0.02
        _, hi, ts = kj.widen(1.0, math.exp(-h), math.exp(h), 0.02, 6)
        self.assertAlmostEqual(ts[1], kj.t975(24))
        self.assertAlmostEqual(math.log(hi), kj.t975(24) * math.sqrt(2) * 0.02)

    def test_t975_matches_the_table_and_falls_to_the_normal(self):
        self.assertAlmostEqual(kj.t975(1), 12.706)
        self.assertAlmostEqual(kj.t975(0.3), 12.706)  # at least one dof
        self.assertAlmostEqual(kj.t975(10), 2.228)
        self.assertAlmostEqual(kj.t975(60), 2.000, places=3)
        self.assertAlmostEqual(kj.t975(120), 1.980, places=3)
        self.assertAlmostEqual(kj.t975(1e9), 1.96, places=3)
        self.assertTrue(4.303 > kj.t975(2.5) > 3.182)
        prev = kj.t975(1)
        for d in [x / 4 for x in range(5, 400)]:
            self.assertLessEqual(kj.t975(d), prev + 1e-12)
            prev = kj.t975(d)

class RunnerSchedule(unittest.TestCase):
    """Which runner of each side times block pair b (Judge.time_both)."""

    @staticmethod
    def order(b):  # R C C R | C R R C: which side times first in block pair b
        return "RC" if (b // 2 + b) % 2 == 0 else "CR"

    def sequence(self, n_ref, n_cand, pairs):
        """The blocks in the order they run: (side, runner) per block."""
        seq = []
        for b in range(pairs):
            r, c = kj.runner_schedule(b, n_ref, n_cand, True)
            for side in self.order(b):
                seq.append((side, r if side == "R" else c))
        return seq

    def test_cpu_no_block_follows_its_own_runner(self):
        # A runner that follows itself finds its inputs and outputs in the
        # caches (~0.4 ms ReLU: up to 7% faster, issue #49 stop 55); with
        # two or more a side, every block follows another process.
        for n_ref, n_cand in ((2, 2), (1, 2), (2, 1), (3, 3), (4, 4)):
            seq = self.sequence(n_ref, n_cand, 32 * n_ref * n_cand)
            for (side, runner), prev in zip(seq[1:], seq):
                if (side == "R" and n_ref > 1) or (side == "C" and n_cand > 1):
                    self.assertNotEqual(prev, (side, runner), (n_ref, n_cand))

    def test_cpu_every_runner_has_the_same_neighbours_and_orders(self):
        for n in (2, 3, 4):
            seq = self.sequence(n, n, 32 * n * n)
            after, orders = {}, {}
            for i, (side, runner) in enumerate(seq):
                if i:
                    kind = "own side" if seq[i - 1][0] == side else "other side"
                    after.setdefault((side, runner), {}).setdefault(kind, 0)
                    after[(side, runner)][kind] += 1
            for b in range(32 * n * n):
                r, c = kj.runner_schedule(b, n, n, True)
                for key in (("R", r), ("C", c)):
                    orders.setdefault(key, {}).setdefault(self.order(b), 0)
                    orders[key][self.order(b)] += 1
            for side in "RC":
                # (the first block of all follows nothing)
                mixes = {k: v for k, v in after.items() if k[0] == side and k != ("R", 0)}
                self.assertEqual(len({tuple(sorted(v.items())) for v in mixes.values()}), 1,
                                 (n, side, after))
                self.assertEqual(len({tuple(sorted(v.items())) for k, v in orders.items()
                                      if k[0] == side}), 1, (n, side, orders))
                for v in orders.values():
                    self.assertEqual(v["RC"], v["CR"], (n, orders))

    def test_cpu_each_candidate_runner_meets_every_reference_runner_alike(self):
        for n_ref, n_cand in ((2, 2), (4, 4), (2, 4)):
            met = {}
            for b in range(16 * n_ref * n_cand):
                key = kj.runner_schedule(b, n_ref, n_cand, True)
                met[key] = met.get(key, 0) + 1
            self.assertEqual(set(met), {(r, c) for r in range(n_ref) for c in range(n_cand)})
            self.assertEqual(len(set(met.values())), 1, (n_ref, n_cand, met))

    def test_cpu_every_runner_times_two_blocks_by_the_first_stop(self):
        # time_both's first stop is at max(10, ...) block pairs
        got = [kj.runner_schedule(b, 2, 2, True) for b in range(10)]
        for i in range(2):
            self.assertGreaterEqual(sum(r == i for r, _ in got), 2)
            self.assertGreaterEqual(sum(c == i for _, c in got), 2)

    def test_gpu_every_runner_times_both_orders_within_2n_blocks(self):
        for n in (1, 2, 3, 4, 8):
            seen = {("ref", i): set() for i in range(n)}
            seen.update({("cand", i): set() for i in range(n)})
            for b in range(2 * n):
                r, c = kj.runner_schedule(b, n, n, False)
                seen[("ref", r)].add(self.order(b))
                seen[("cand", c)].add(self.order(b))
            for key, orders in seen.items():
                self.assertEqual(orders, {"RC", "CR"}, (n, key))

    def test_gpu_each_candidate_runner_meets_every_reference_runner(self):
        n = 4
        pairs = {kj.runner_schedule(b, n, n, False) for b in range(2 * n * n)}
        self.assertEqual(pairs, {(r, c) for r in range(n) for c in range(n)})


class MoreRunnersFit(unittest.TestCase):
    """How many further runners a side take part (Judge._more_runners_fit):
    on the GPU each level holds one more copy of the reference's parameters
    and outputs on each side, within half the memory budget."""

    @staticmethod
    def fit(device, public, budget_mb, n_params, n_out, forked=3):
        import torch
        j = judge(device)
        j.budget = budget_mb << 20
        j.ref = torch.nn.Linear(n_params, 1, bias=False)  # n_params float32 weights
        j.first_ref = torch.empty(n_out)                   # n_out float32 outputs
        est = 2 * 4 * n_out  # (no inputs in this estimate)
        return j._more_runners_fit(public, est, forked), j.evidence

    def test_cpu_uses_the_runners_the_job_asks_for(self):
        self.assertEqual(self.fit("cpu", False, 1, 1 << 20, 1 << 20)[0], 1)  # 2 a side
        self.assertEqual(self.fit("cpu", True, 1, 1 << 20, 1 << 20)[0], 1)
        self.assertEqual(self.cpu_fit({"reference_runners": 4, "candidate_runners": 4}, 0.0)[0], 3)
        self.assertEqual(self.cpu_fit({"reference_runners": 4}, 0.0, forked=2)[0], 2)

    @staticmethod
    def cpu_fit(job_fields, call_s, public=False, forked=3):
        """_more_runners_fit on the CPU with a reference whose call sleeps
        call_s (the judge's own timing of it decides)."""
        import time
        import torch

        class Sleepy(torch.nn.Module):
            def forward(self, x):
                time.sleep(call_s)
                return x + 1
        j = judge("cpu")
        j.job.update(job_fields)
        j.ref = Sleepy()
        j.first = [torch.zeros(4)]
        return j._more_runners_fit(public, 0, forked), j.evidence

    def test_cpu_slow_calls_get_the_slow_runners_and_fast_ones_do_not(self):
        # calls are timed alone from timing_batch_us = 200 us
        n, ev = self.cpu_fit({"timing_lone_runners": 4}, 0.002)
        self.assertEqual(n, 3)
        self.assertTrue(ev["lone_call_runners"]["used"])
        self.assertGreaterEqual(ev["lone_call_runners"]["reference_call_ms"], 2)
        n, ev = self.cpu_fit({"timing_lone_runners": 4}, 0.0)
        self.assertEqual(n, 1)
        self.assertFalse(ev["lone_call_runners"]["used"])
        # a CHECK times nothing: the job's count, no estimate
        n, ev = self.cpu_fit({"timing_lone_runners": 4}, 0.015, public=True)
        self.assertEqual(n, 1)
        self.assertNotIn("lone_call_runners", ev)
        # an explicit count at or over the slow one is the count
        n, _ = self.cpu_fit({"timing_lone_runners": 4, "reference_runners": 4}, 0.0)
        self.assertEqual(n, 3)

    def test_timing_the_reference_leaves_the_global_rng_as_it_was(self):
        import torch

        class Draws(torch.nn.Module):
            def forward(self, x):
                return x + torch.rand(x.shape)
        j = judge("cpu")
        j.job.update({"timing_lone_runners": 4})
        j.ref = Draws()
        j.first = [torch.zeros(4)]
        torch.manual_seed(3)
        want = torch.rand(2)
        torch.manual_seed(3)
        j._more_runners_fit(False, 0, 3)
        self.assertIn("lone_call_runners", j.evidence)  # the reference was timed
        self.assertTrue(torch.equal(torch.rand(2), want))

    def test_only_the_gated_extras_get_their_go(self):
        sent = []

        class Sock:
            def __init__(self, i):
                self.i = i

            def send(self, data):
                sent.append((self.i, data))

        class R:
            def __init__(self, i):
                self.ch = type("Ch", (), {"sock": Sock(i)})()
        j = judge("cpu")
        j.start_gated([R("r1"), R("r2"), R("r3")], [R("c1"), R("c2"), R("c3")])
        self.assertEqual(sent, [("r2", b"g"), ("r3", b"g"), ("c2", b"g"), ("c3", b"g")])
        sent.clear()
        j.job.update({"reference_runners": 3})
        j.start_gated([R("r1"), R("r2")], [R("c1")])
        self.assertEqual(sent, [])

    def test_a_gpu_check_times_nothing_and_uses_none(self):
        self.assertEqual(self.fit("cuda", True, 4096, 16, 16)[0], 0)

    def test_a_small_gpu_model_gets_all_of_them(self):
        n, ev = self.fit("cuda", False, 4096, 1024, 1024)
        self.assertEqual(n, 3)
        self.assertEqual(ev["runner_pair_bytes"], 2 * (4 * 1024 + 2 * 4 * 1024))

    def test_a_large_gpu_model_gets_what_half_the_budget_holds(self):
        mb = 1 << 20
        n_out = 64 * mb // 4
        # parameters 64 MB, outputs 64 MB: a level is 2 * (64 + 128) = 384 MB;
        # half of 2048 MB less the 128 MB estimate holds 2 levels
        n, ev = self.fit("cuda", False, 2048, n_out, n_out)
        self.assertEqual(ev["runner_pair_bytes"], 384 * mb)
        self.assertEqual(n, 2)
        # and none when the estimate alone takes half the budget
        self.assertEqual(self.fit("cuda", False, 256, n_out, n_out)[0], 0)


class TimingHealth(unittest.TestCase):
    """Runner processes whose times cannot be trusted (a machine fault: on a
    shadow-paging VM a forked runner ran the same ReLU 10-50x slower than
    its sibling for its whole life)."""

    @staticmethod
    def health(ref_meds, cand_meds, judge_ns):
        process = {"reference_medians_ns": ref_meds, "candidate_medians_ns": cand_meds}
        return kj.timing_health(process, judge_ns, 1.5, 3.0)

    def test_a_healthy_machine_passes(self):
        # per-process spread of a few percent, runners a little slower than
        # the judge's warm loop (their calls follow a wake-up)
        h = self.health([5_000, 5_200], [5_100, 4_900], 3_300)
        self.assertTrue(h["ok"], h["reasons"])
        self.assertEqual(h["reasons"], [])
        self.assertFalse(h["machine"])
        self.assertAlmostEqual(h["reference_runner_ratio"], 1.04)

    def test_one_slow_candidate_runner_is_distrusted(self):
        h = self.health([5_000, 5_100], [5_000, 150_000], 4_000)
        self.assertFalse(h["ok"])
        self.assertEqual(len(h["reasons"]), 1)
        self.assertIn("candidate runners", h["reasons"][0])
        # the candidate's code may behave per process: not the machine's fault
        self.assertFalse(h["machine"])

    def test_one_slow_reference_runner_is_distrusted(self):
        h = self.health([170_000, 5_000], [5_000, 5_100], 4_000)
        self.assertFalse(h["ok"])
        self.assertIn("reference runners", h["reasons"][0])
        # the reference's code is the task's: the host is at fault
        self.assertTrue(h["machine"])

    def test_both_reference_runners_slow_is_a_false_win_and_distrusted(self):
        # they agree with each other; only the judge's own time shows it
        h = self.health([170_000, 168_000], [5_000, 5_100], 4_000)
        self.assertFalse(h["ok"])
        self.assertEqual(len(h["reasons"]), 1)
        self.assertIn("judge's own time", h["reasons"][0])
        self.assertAlmostEqual(h["reference_over_judge"], 42.0)
        self.assertTrue(h["machine"])

    def test_a_slow_judge_does_not_distrust_the_runners(self):
        # the judge's own process slow: the runners are not worse for it
        self.assertTrue(self.health([5_000, 5_100], [5_000, 5_050], 60_000)["ok"])

    def test_one_runner_a_side_checks_what_it_can(self):
        h = kj.timing_health({"reference_medians_ns": [5_000, 5_100]}, 4_000, 1.5, 3.0)
        self.assertTrue(h["ok"])
        self.assertNotIn("candidate_runner_ratio", h)
        self.assertTrue(kj.timing_health(None, 4_000, 1.5, 3.0)["ok"])

    def test_a_replay_seen_by_the_first_probe_only_is_distrusted_as_the_candidates(self):
        # hacks/rt_replay_until_unseen: the first probe (between the blocks)
        # saw it replay, the second (after them) found the warned process
        # computing; fresh processes measure again (protocol::timing_outcome)
        process = {"reference_medians_ns": [5_000, 5_100], "candidate_medians_ns": [900, 910]}
        replay = {"candidate_ratio": 94.2, "reference_ratio": 1.03, "first_only": True,
                  "again": {"candidate_ratio": 1.0, "reference_ratio": 0.98}}
        h = kj.timing_health(process, 4_000, 1.5, 3.0, replay)
        self.assertFalse(h["ok"])
        self.assertEqual(len(h["reasons"]), 1)
        self.assertIn("94.2x", h["reasons"][0])
        self.assertIn("its second 1.0x", h["reasons"][0])
        self.assertFalse(h["machine"])
        # a probe that ran and found nothing (no first_only) leaves it trusted
        del replay["first_only"]
        self.assertTrue(kj.timing_health(process, 4_000, 1.5, 3.0, replay)["ok"])
        self.assertTrue(kj.timing_health(process, 4_000, 1.5, 3.0, {"run": False})["ok"])


if __name__ == "__main__":
    unittest.main()
