#!/usr/bin/env python3
"""tools/house/check_row_writes.py: no module but agent/ and store/ builds an
episodes, evaluations, turns or finals row (issue 46), and the check does
catch one that does."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "house"))
import check_row_writes  # noqa: E402


class RowWritesTest(unittest.TestCase):
    def test_only_the_engine_and_the_store_build_rows(self):
        self.assertEqual(check_row_writes.writes(ROOT), {})

    def test_a_row_built_elsewhere_is_caught_and_a_read_is_not(self):
        with tempfile.TemporaryDirectory() as root:
            for d in ("daemon", "agent", "reports"):
                os.makedirs(os.path.join(root, d))
            with open(os.path.join(root, "daemon", "a.cpp"), "w") as f:
                f.write("void f() {\n  store::EvaluationRow row;\n  b.put(store::FinalRow{});\n"
                        "  store::TurnRow t = x;\n}\n")
            with open(os.path.join(root, "reports", "b.cpp"), "w") as f:
                f.write("const store::TurnRow* t = nullptr;\nconst store::FinalRow& f = g();\n"
                        "std::vector<store::EpisodeRow> v;\n// store::TurnRow t;\n")
            with open(os.path.join(root, "agent", "c.cpp"), "w") as f:
                f.write("store::TurnRow t;\n")
            self.assertEqual(check_row_writes.writes(root), {"daemon/a.cpp": [2, 3, 4]})


if __name__ == "__main__":
    unittest.main()
