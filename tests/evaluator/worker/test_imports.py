"""The worker's Python modules import one way (issue #36): no circle, not
even through an import inside a function, and the leaves import none of the
worker's other modules. Read from the sources (ast), so an import that only
runs on a GPU is seen too."""
import ast
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py")
LEAVES = {"korch_build", "korch_tasks", "korch_transport", "korch_domain", "korch_protocol"}


def worker_modules():
    return sorted(f[:-3] for f in os.listdir(PY) if f.startswith("korch_") and f.endswith(".py"))


def imports_of(name, known):
    """The worker modules `name` imports, at any depth of its code."""
    tree = ast.parse(open(os.path.join(PY, name + ".py")).read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out & known


def find_cycle(graph):
    state = {}

    def visit(n, path):
        state[n] = "open"
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                return path + [n, m]
            if m not in state:
                c = visit(m, path + [n])
                if c:
                    return c
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n, [])
            if c:
                return c
    return None


class Imports(unittest.TestCase):
    def setUp(self):
        self.known = set(worker_modules())
        self.graph = {n: imports_of(n, self.known) - {n} for n in self.known}

    def test_the_graph_has_no_cycle(self):
        self.assertIsNone(find_cycle(self.graph), "import cycle among the worker's modules")

    def test_leaves_import_no_worker_module(self):
        for leaf in LEAVES & self.known:
            self.assertEqual(self.graph[leaf], set(), leaf)

    def test_the_checker_sees_a_cycle(self):
        # The check itself: a graph with a circle through a function-level
        # import (as korch_runner -> korch_worker -> korch_judge -> korch_runner
        # was before issue #36) is found.
        g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
        self.assertEqual(find_cycle(g)[0], find_cycle(g)[-1])
        self.assertIsNone(find_cycle({"a": {"b"}, "b": set()}))


if __name__ == "__main__":
    unittest.main()
