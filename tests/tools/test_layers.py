#!/usr/bin/env python3
"""tools/house/check_layers.py: the repo's includes all point down a floor,
and the check does catch an arrow that points up or sideways."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "house"))
import check_layers  # noqa: E402


class LayersTest(unittest.TestCase):
    def test_every_include_of_the_repo_points_down(self):
        found = check_layers.arrows(ROOT)
        self.assertIn(("daemon", "store"), found)  # the walk does read the tree
        self.assertEqual(check_layers.upward(found), {})

    def test_an_upward_or_sideways_include_is_caught(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "store"))
            os.makedirs(os.path.join(root, "reports"))
            with open(os.path.join(root, "store", "a.cpp"), "w") as f:
                f.write('#include "util/log.hpp"\n#include "daemon/daemon.hpp"\n')
            with open(os.path.join(root, "reports", "b.hpp"), "w") as f:
                f.write('#  include "evaluator/evaluator.hpp"\n#include <vector>\n')
            bad = check_layers.upward(check_layers.arrows(root))
            self.assertEqual(set(bad), {("store", "daemon"), ("reports", "evaluator")})
            self.assertEqual(bad[("store", "daemon")], ["store/a.cpp:2"])

    def test_only_the_evaluation_queue_of_the_evaluator_reaches_the_store(self):
        # Issue #49: the queue evaluator and korch worker's loop live in
        # evaluator/remote/, the one room of the evaluator that includes store/.
        found = check_layers.arrows(ROOT)
        self.assertTrue(found[("evaluator", "store")])
        self.assertTrue(all(w.startswith("evaluator/remote/") for w in found[("evaluator", "store")]))
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "evaluator", "remote"))
            with open(os.path.join(root, "evaluator", "remote", "q.cpp"), "w") as f:
                f.write('#include "store/work_queue.hpp"\n')
            self.assertEqual(check_layers.upward(check_layers.arrows(root)), {})
            with open(os.path.join(root, "evaluator", "zygote.cpp"), "w") as f:
                f.write('#include "util/log.hpp"\n#include "store/store.hpp"\n')
            bad = check_layers.upward(check_layers.arrows(root))
            self.assertEqual(bad, {("evaluator", "store"): ["evaluator/zygote.cpp:2"]})


if __name__ == "__main__":
    unittest.main()
