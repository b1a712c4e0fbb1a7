"""A runner's setup (korch_runner.load_model) in real processes: the runners
of one side share the job's /tmp and the module path, and build their models
at the same moment."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_runner as kr  # noqa: E402

CODE = '''import torch


class ModelNew(torch.nn.Module):
    """Padding, so that writing the file is not one small write: %s"""

    def forward(self, x):
        return torch.relu(x)
''' % ("x" * 20000)


class SharedModulePath(unittest.TestCase):
    def test_runners_loading_at_once_all_find_the_class(self):
        # Eight processes load the same module at the same path 40 times each.
        # When each wrote the path in place, one could execute the file while
        # another had just truncated it ("the candidate module defines no
        # ModelNew", seen with four candidate runners on the H200).
        with tempfile.TemporaryDirectory() as root:
            kr.MODULE_ROOT = root
            msg = {"code": CODE, "class_name": "ModelNew", "init_seed": 1, "device": "cpu"}
            pids = []
            for _ in range(8):
                pid = os.fork()
                if pid == 0:
                    failed = 0
                    for _ in range(40):
                        try:
                            kr.load_model(msg, "reference")
                        except Exception:  # noqa: BLE001 - counted, reported by the exit code
                            failed += 1
                    os._exit(min(failed, 100))
                pids.append(pid)
            failures = [os.WEXITSTATUS(os.waitpid(p, 0)[1]) for p in pids]
            self.assertEqual(failures, [0] * 8)
            # what is left at the path is the whole module, and no temporary copy
            path = os.path.join(root, "korch_reference", "korch_reference.py")
            with open(path) as f:
                self.assertEqual(f.read(), CODE)
            left = [n for n in os.listdir(os.path.dirname(path)) if n.startswith("korch_reference.py.")]
            self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main()
