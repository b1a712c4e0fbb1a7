"""The evaluator's Python packages import one way (issue #36): the worker's
modules (evaluator/worker/py) and the static rules' (evaluator/rules). No
circle, not even through an import inside a function, and the leaves import
none of their package's other modules. Read from the sources (ast), so an
import that only runs on a GPU is seen too; an import under
`if TYPE_CHECKING:` (for annotations only) never runs and is not counted."""
import ast
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..", "evaluator")
PY = os.path.join(ROOT, "worker", "py")
RULES = os.path.join(ROOT, "rules")
# (korch_domain reads its inputs a chunk at a time with korch_chunks, issue #47.)
LEAVES = {"korch_build", "korch_chunks", "korch_tasks", "korch_transport", "korch_protocol"}
RULE_LEAVES = {"korch_elf", "korch_rule_types", "korch_policy_tables"}


def worker_modules(folder=PY):
    return sorted(f[:-3] for f in os.listdir(folder) if f.startswith("korch_") and f.endswith(".py"))


def _type_checking_only(tree):
    """The nodes under `if TYPE_CHECKING:` (never run)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def imports_of(name, known, folder=PY):
    """The modules of `known` that `name` imports, at any depth of its code."""
    tree = ast.parse(open(os.path.join(folder, name + ".py")).read())
    skip = _type_checking_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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

    def test_the_rules_have_no_cycle_and_their_leaves_import_none(self):
        known = set(worker_modules(RULES))
        self.assertIn("korch_rules", known)
        graph = {n: imports_of(n, known, RULES) - {n} for n in known}
        self.assertIsNone(find_cycle(graph), "import cycle among the rules' modules")
        for leaf in RULE_LEAVES:
            self.assertEqual(graph[leaf], set(), leaf)
        # The symbol allowlist decides a cached build's verdict: its digest
        # covers korch_symbols and korch_elf, so it may read nothing else.
        self.assertEqual(graph["korch_symbols"], {"korch_elf"})
        # korch_rules is the top: nothing imports it.
        self.assertFalse([n for n in known if "korch_rules" in graph[n]])

    def test_no_module_over_800_lines_but_a_table(self):
        # The judge is split by job (compare, families, timing) and the rules
        # by job (policy, context, load_inline, native, symbols, ELF).
        tables = {"korch_policy_tables"}
        for folder in (PY, RULES):
            for name in worker_modules(folder):
                with open(os.path.join(folder, name + ".py")) as f:
                    n = sum(1 for _ in f)
                if name not in tables:
                    self.assertLessEqual(n, 800, "%s.py is %d lines" % (name, n))

    def test_the_checker_sees_a_cycle(self):
        # The check itself: a graph with a circle through a function-level
        # import (as korch_runner -> korch_worker -> korch_judge -> korch_runner
        # was before issue #36) is found.
        g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
        self.assertEqual(find_cycle(g)[0], find_cycle(g)[-1])
        self.assertIsNone(find_cycle({"a": {"b"}, "b": set()}))


if __name__ == "__main__":
    unittest.main()
