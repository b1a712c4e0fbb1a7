"""Context: everything a Python rule check needs, computed once per candidate
(the AST, its scopes and aliases, the load_inline calls, resolved), and the
AST helpers the checks share."""
from __future__ import annotations

import ast
import unicodedata
from typing import Iterator

from korch_inline import _resolve_load_inline_call
from korch_policy_tables import BANNED_MODULES, KNOWN_MODULES, LOAD_INLINE
from korch_rule_types import Finding


class Context:
    """Everything a check needs, computed once per candidate."""

    def __init__(self, source: str, tree: ast.Module, tolerance: str, torch_ops: str):
        self.source = source
        self.tree = tree
        self.tolerance = tolerance
        self.torch_ops = torch_ops
        self.strict = tolerance == "strict"
        self.parents: dict[int, ast.AST] = {}
        self.func_of: dict[int, ast.AST | None] = {}
        self.nodes: list[ast.AST] = []
        self._index(tree, None, None)
        self.module_aliases: dict[str, str] = {}   # name -> module path
        self.import_aliases: dict[str, str] = {}   # name -> any imported path
        self._collect_imports()
        self.bindings: dict[str, list[tuple[ast.AST, ast.AST | None]]] = {}
        self._collect_bindings()
        self.module_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        # `Alias = SomeClass` at module level: the alias is that class.
        self.class_aliases = {
            n.targets[0].id: self.module_classes[n.value.id] for n in tree.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Name) and n.value.id in self.module_classes}
        self.scopes = _Scopes(tree)
        self.events = list(self._attribute_events())
        self.load_inline_calls: list[dict] = []
        self.native_units: list[dict] = []
        self.flag_units: list[dict] = []
        self.load_inline_findings: list[Finding] = []
        self._resolve_load_inline()

    # -- indexing ----------------------------------------------------------
    def _index(self, node, parent, func):
        self.nodes.append(node)
        if parent is not None:
            self.parents[id(node)] = parent
        self.func_of[id(node)] = func
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else func
        for child in ast.iter_child_nodes(node):
            # Decorators, defaults and annotations evaluate in the outer scope.
            self._index(child, node, inner if child not in _outer_parts(node) else func)

    def parent(self, node):
        return self.parents.get(id(node))

    def walk(self, *types):
        return (n for n in self.nodes if isinstance(n, types))

    # -- names -------------------------------------------------------------
    def _collect_imports(self):
        for node in self.walk(ast.Import):
            for a in node.names:
                if a.asname:
                    self.import_aliases[a.asname] = a.name
                    self.module_aliases[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    self.import_aliases[root] = root
                    self.module_aliases[root] = root
        for node in self.walk(ast.ImportFrom):
            if node.level or not node.module:
                continue
            for a in node.names:
                if a.name == "*":
                    continue
                path = f"{node.module}.{a.name}"
                bound = a.asname or a.name
                self.import_aliases[bound] = path
                if path in KNOWN_MODULES or a.name in BANNED_MODULES:
                    self.module_aliases[bound] = path

    def _collect_bindings(self):
        def add(name, node):
            self.bindings.setdefault(name, []).append((node, self.func_of.get(id(node))))
        for n in self.nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                add(n.id, n)
            elif isinstance(n, ast.arg):
                add(n.arg, n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(n.name, n)
            elif isinstance(n, ast.alias):
                add(n.asname or n.name.split(".")[0], n)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                for name in n.names:
                    add(name, n)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                add(n.name, n)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                add(n.name, n)
            elif isinstance(n, ast.MatchMapping) and n.rest:
                add(n.rest, n)

    def qualname(self, node) -> str | None:
        """Dotted path of an expression rooted at an imported name, or None."""
        if isinstance(node, ast.Name):
            return self.import_aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        lit = _literal_getattr(node)
        if lit is not None:
            base = self.qualname(node.args[0])
            return f"{base}.{lit}" if base else None
        return None

    def _attribute_events(self) -> Iterator[tuple[ast.AST, str, str | None]]:
        """(node, attribute name, resolved path) for every attribute access,
        literal getattr/hasattr, and `from M import name`."""
        for n in self.nodes:
            if isinstance(n, ast.Attribute):
                yield n, n.attr, self.qualname(n)
            elif isinstance(n, ast.Call):
                lit = _literal_getattr(n)
                if lit is not None:
                    yield n, lit, self.qualname(n)
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                for a in n.names:
                    if a.name != "*":
                        yield n, a.name, f"{n.module}.{a.name}"
            elif isinstance(n, ast.Import):
                for a in n.names:
                    parts = a.name.split(".")
                    for i in range(1, len(parts)):
                        yield n, parts[i], ".".join(parts[: i + 1])

    def is_load_inline_call(self, node) -> bool:
        return isinstance(node, ast.Call) and self.qualname(node.func) == LOAD_INLINE

    # -- load_inline -------------------------------------------------------
    def _resolve_load_inline(self):
        for call in self.walk(ast.Call):
            if not self.is_load_inline_call(call):
                continue
            entry, findings = _resolve_load_inline_call(self, call)
            self.load_inline_findings.extend(findings)
            if entry is None:
                continue
            if entry["functions"]:  # (without them: refused above, nothing to build)
                self.load_inline_calls.append(entry)
            for kind in ("cpp_sources", "cuda_sources"):
                for i, src in enumerate(entry[kind]):
                    self.native_units.append({"where": f"{kind}[{i}]", "text": src,
                                              "line": call.lineno, "kind": kind})
            for kind in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
                self.flag_units.append({"kind": kind, "flags": entry[kind], "line": call.lineno})


class _Scope:
    """One Python scope: module, class, function (def or lambda) or
    comprehension, with the names bound in it."""

    def __init__(self, kind: str, parent: "_Scope | None"):
        self.kind = kind
        self.parent = parent
        self.bound: set[str] = set()
        self.deleted: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        # Module and class scopes: name -> index of the first body statement
        # that binds it unconditionally (a name bound only under `if`, `for`
        # or `while` may still be unbound there, and then the builtin shows
        # through).
        self.definite: dict[str, int] = {}


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _target_names(target) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for e in target.elts:
            yield from _target_names(e)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _definite_bindings(stmt) -> Iterator[str]:
    """Names that a module- or class-level statement binds whenever it
    completes (so later statements of that body see them bound)."""
    if isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            yield from _target_names(t)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        if getattr(stmt, "value", None) is not None:
            yield from _target_names(stmt.target)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for a in stmt.names:
            if a.name != "*":
                yield a.asname or a.name.split(".")[0]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield stmt.name
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                yield from _target_names(item.optional_vars)


class _Scopes:
    """Python's name resolution, enough to tell whether a name refers to the
    builtin of that name: a function's parameters and locals (an unbound
    local raises, it never falls back to builtins), enclosing functions'
    names, and module or class names bound unconditionally before use."""

    def __init__(self, tree: ast.Module):
        self.info: dict[int, tuple[_Scope, int, int | None]] = {}
        self.module = _Scope("module", None)
        self._body(tree.body, self.module)
        for i, stmt in enumerate(tree.body):
            self._visit(stmt, self.module, i, None)

    @staticmethod
    def _body(body, scope):
        for i, stmt in enumerate(body):
            for name in _definite_bindings(stmt):
                scope.definite.setdefault(name, i)

    def _visit(self, node, scope, mi, ci):
        v = self._visit
        if isinstance(node, ast.Name):
            self.info[id(node)] = (scope, mi, ci)
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                scope.bound.add(node.id)
                if isinstance(node.ctx, ast.Del):
                    scope.deleted.add(node.id)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                scope.bound.add(node.name)
                for d in node.decorator_list:
                    v(d, scope, mi, ci)
                if node.returns is not None:
                    v(node.returns, scope, mi, ci)
            a = node.args
            for d in list(a.defaults) + [d for d in a.kw_defaults if d is not None]:
                v(d, scope, mi, ci)
            fs = _Scope("function", scope)
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                fs.bound.add(arg.arg)
                if arg.annotation is not None:
                    v(arg.annotation, scope, mi, ci)
            for stmt in (node.body if isinstance(node.body, list) else [node.body]):
                v(stmt, fs, mi, None)
            return
        if isinstance(node, ast.ClassDef):
            scope.bound.add(node.name)
            for e in list(node.bases) + [k.value for k in node.keywords] + list(node.decorator_list):
                v(e, scope, mi, ci)
            cs = _Scope("class", scope)
            self._body(node.body, cs)
            for i, stmt in enumerate(node.body):
                v(stmt, cs, mi, i)
            return
        if isinstance(node, _COMPREHENSIONS):
            v(node.generators[0].iter, scope, mi, ci)
            cs = _Scope("comprehension", scope)
            for k, g in enumerate(node.generators):
                v(g.target, cs, mi, ci)
                if k:
                    v(g.iter, cs, mi, ci)
                for cond in g.ifs:
                    v(cond, cs, mi, ci)
            for part in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)):
                v(part, cs, mi, ci)
            return
        if isinstance(node, ast.NamedExpr):
            target_scope = scope
            while target_scope.kind == "comprehension":
                target_scope = target_scope.parent
            self.info[id(node.target)] = (scope, mi, ci)
            target_scope.bound.add(node.target.id)
            v(node.value, scope, mi, ci)
            return
        if isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)
        elif isinstance(node, ast.alias):
            scope.bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            scope.bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.bound.add(node.rest)
        for child in ast.iter_child_nodes(node):
            v(child, scope, mi, ci)

    def is_builtin(self, node: ast.Name) -> bool:
        """True if the name, where it is read, can refer to the builtin."""
        where = self.info.get(id(node))
        if where is None:
            return True
        scope, mi, ci = where
        name = node.id
        s = scope
        while s is not None:
            if name in s.globals:
                s = self.module
            if s.kind in ("function", "comprehension"):
                if name in s.nonlocals:
                    s = s.parent
                    continue
                if name in s.bound:
                    return False
            elif s.kind == "class":
                # Only code directly in the class body sees the class's names.
                first = s.definite.get(name)
                if (s is scope and ci is not None and first is not None and first < ci
                        and name not in s.deleted):
                    return False
            else:  # module
                first = s.definite.get(name)
                return not (first is not None and first < mi and name not in s.deleted)
            s = s.parent
        return True


def _outer_parts(node) -> list:
    """Children of a def/lambda evaluated in the enclosing scope."""
    parts: list = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts += node.decorator_list
        if node.returns is not None:
            parts.append(node.returns)
        parts.append(node.args)
    elif isinstance(node, ast.Lambda):
        parts.append(node.args)
    return parts


def _literal_getattr(node) -> str | None:
    """`getattr(x, "name"[, d])` / `hasattr(x, "name")` -> NFKC name, else None."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
            and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return unicodedata.normalize("NFKC", node.args[1].value)
    return None


def _segment(ctx: Context, node) -> str:
    try:
        return ast.get_source_segment(ctx.source, node) or ""
    except Exception:  # positions missing on synthetic nodes
        return ""


def annotations(nodes) -> list:
    """Every annotation among `nodes`, in their order: an argument's, a
    function's return, an annotated assignment's."""
    out = []
    for n in nodes:
        if isinstance(n, ast.arg) and n.annotation is not None:
            out.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            out.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            out.append(n.annotation)
    return out
