"""The job protocol's schema on the Python side (issue #36): the worker reads
its versions and verdicts from evaluator/protocol/protocol.json, the file the
C++ Verdict enum is generated from (JobProtocol.VerdictsAreTheSchemas checks
that side), and every verdict a Python file of the worker names is in it.
Issue #49: the measure result's typed parts (TimingHealth, CountedWork, the
measured numbers) are dataclasses made from the same file, and the judge
writes its evidence through them."""
import dataclasses
import ast
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py")
SCHEMA = os.path.join(HERE, "..", "..", "..", "evaluator", "protocol", "protocol.json")
sys.path.insert(0, PY)

import korch_judge as kj  # noqa: E402
import korch_protocol  # noqa: E402
import korch_timing  # noqa: E402


def named_verdicts(path):
    """Every string literal the file passes as Verdict's first argument, or
    as the value of a "verdict" key of a dict literal."""
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Verdict" and node.args:
            a = node.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                yield node.lineno, a.value
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "verdict" and \
                        isinstance(v, ast.Constant) and isinstance(v.value, str):
                    yield node.lineno, v.value


class ProtocolSchemaTest(unittest.TestCase):
    def test_the_module_is_the_file(self):
        schema = json.load(open(SCHEMA))
        self.assertEqual(korch_protocol.EVAL_VERSION, schema["evaluator_version"])
        self.assertEqual(korch_protocol.JOB_PROTOCOL, schema["job_protocol"])
        self.assertEqual(list(korch_protocol.VERDICTS), [v["name"] for v in schema["verdicts"]])

    def test_every_verdict_the_worker_names_is_in_the_schema(self):
        known = set(korch_protocol.VERDICTS)
        seen = 0
        for name in sorted(os.listdir(PY)):
            if not name.endswith(".py"):
                continue
            for line, verdict in named_verdicts(os.path.join(PY, name)):
                seen += 1
                self.assertIn(verdict, known, "%s:%d names verdict %r" % (name, line, verdict))
        self.assertGreater(seen, 15)  # the judge names most verdicts; the scan found them

    def test_an_unknown_verdict_is_a_loud_error(self):
        with self.assertRaises(ValueError) as cm:
            kj.Verdict("incorect", "a typo")
        self.assertIn("protocol.json", str(cm.exception))
        self.assertEqual(kj.Verdict("incorrect", "fine").verdict, "incorrect")


class MeasureResultSchemaTest(unittest.TestCase):
    def test_the_dataclasses_are_the_file(self):
        schema = json.load(open(SCHEMA))["measure_result"]
        self.assertEqual(list(korch_protocol.MEASURED),
                         [f["name"] for f in schema["measured"]["fields"]])
        for spec in schema["structs"]:
            cls = korch_protocol.STRUCTS[spec["name"]]
            self.assertEqual([f.name for f in dataclasses.fields(cls)],
                             [f["name"] for f in spec["fields"]])

    def test_timing_health_writes_the_schemas_fields(self):
        names = {f.name for f in dataclasses.fields(korch_protocol.TimingHealth)}
        # The candidate's runners 30x apart (its own doing), and the reference
        # runners far slower than the judge (the host's).
        cand = korch_timing.timing_health(
            {"reference_medians_ns": [100, 101], "candidate_medians_ns": [10, 300]}, 100, 1.5, 3.0)
        host = korch_timing.timing_health(
            {"reference_medians_ns": [900, 905], "candidate_medians_ns": [10, 10]}, 100, 1.5, 3.0)
        for h in (cand, host):
            self.assertLessEqual(set(h), names)
        self.assertEqual((cand["ok"], cand["machine"]), (False, False))
        self.assertEqual((host["ok"], host["machine"]), (False, True))
        self.assertEqual(cand["candidate_runner_ratio"], 30.0)

    def test_a_field_the_schema_lacks_is_a_loud_error(self):
        with self.assertRaises(TypeError):
            korch_protocol.evidence(korch_protocol.CountedWork, flop=1.0)
        with self.assertRaises(TypeError):
            korch_protocol.evidence(korch_protocol.TimingHealth, ok="yes")
        with self.assertRaises(TypeError):
            korch_protocol.measured(speedup_ci=(1, 2))
        self.assertEqual(korch_protocol.evidence(korch_protocol.CountedWork, error="x"),
                         {"error": "x"})


if __name__ == "__main__":
    unittest.main()
