"""The job protocol's schema on the Python side (issue #36): the worker reads
its versions and verdicts from evaluator/protocol/protocol.json, the file the
C++ Verdict enum is generated from (JobProtocol.VerdictsAreTheSchemas checks
that side), and every verdict a Python file of the worker names is in it."""
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


if __name__ == "__main__":
    unittest.main()
