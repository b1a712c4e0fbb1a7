"""The Python rule checks (the AST policy). Each check takes a Context and
yields (line, detail); the table in korch_rules names them."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from korch_context import Context, annotations, _literal_getattr, _segment
from korch_policy_tables import (
    ALLOWED_BASES,
    ALLOWED_DECORATORS,
    ALLOWED_IMPORTS,
    ALLOWED_IMPORT_PREFIXES,
    ALLOWED_ROOTS,
    BANNED_BUILTINS,
    BANNED_MODULES,
    DENY_PATHS,
    INTERNALS,
    INTERNALS_ATTRS,
    KNOWN_MODULES,
    LEAF_DENY,
    LOAD_INLINE,
    MUTATING_METHODS,
    NAMESPACE_ALLOW,
    PRECISION_LEAVES,
    PRIVATE_OK,
    PRIVATE_OK_UNDER,
    REEXPORT_EXCEPTIONS,
    TENSOR_BASE_LEAVES,
    TRITON_COMBINE_CALLS,
)

# ---------------------------------------------------------------------------
# Python rule checks. Each yields (line, detail).
# ---------------------------------------------------------------------------

def _check_source_encoding(ctx):
    for i, line in enumerate(ctx.source.splitlines()[:2], start=1):
        m = re.match(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
        if m and m.group(1).lower().replace("_", "-") not in ("utf-8", "utf8"):
            yield i, f"coding declaration {m.group(1)!r}"


def _check_non_ascii_identifier(ctx):
    def bad(name, raw_ok):
        return not name.isascii() or not raw_ok
    for n in ctx.nodes:
        seg = None
        if isinstance(n, ast.Name):
            seg = _segment(ctx, n)
            if bad(n.id, seg == n.id):
                yield n.lineno, f"identifier {n.id!r}"
        elif isinstance(n, ast.Attribute):
            seg = _segment(ctx, n)
            if bad(n.attr, seg.endswith(n.attr)):
                yield n.lineno, f"attribute {n.attr!r}"
        elif isinstance(n, ast.arg):
            seg = _segment(ctx, n)
            if bad(n.arg, seg.startswith(n.arg)):
                yield n.lineno, f"parameter {n.arg!r}"
        elif isinstance(n, ast.keyword) and n.arg:
            seg = _segment(ctx, n)
            if bad(n.arg, seg.startswith(n.arg)):
                yield getattr(n, "lineno", 0), f"keyword {n.arg!r}"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            seg = _segment(ctx, n)
            head = seg.split("(", 1)[0].split(":", 1)[0]
            head = head.replace("async", " ", 1) if head.lstrip().startswith("async") else head
            head = head.strip()
            for kw in ("def", "class"):
                if head.startswith(kw):
                    head = head[len(kw):].strip()
            if bad(n.name, head == n.name):
                yield n.lineno, f"name {n.name!r}"
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            if not _segment(ctx, n).isascii():
                yield n.lineno, "import statement"
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            if bad(n.name, _segment(ctx, n).endswith(n.name)):
                yield n.lineno, f"capture {n.name!r}"


def _check_imports(ctx):
    for n in ctx.walk(ast.Import):
        for a in n.names:
            if a.name not in ALLOWED_IMPORTS and not a.name.startswith(ALLOWED_IMPORT_PREFIXES):
                yield n.lineno, f"import {a.name}"
    for n in ctx.walk(ast.ImportFrom):
        if n.level:
            yield n.lineno, "relative import"
        elif n.module not in ALLOWED_IMPORTS and not (n.module or "").startswith(ALLOWED_IMPORT_PREFIXES):
            yield n.lineno, f"from {n.module} import ..."


def _check_star_import(ctx):
    for n in ctx.walk(ast.ImportFrom):
        if any(a.name == "*" for a in n.names):
            yield n.lineno, f"from {n.module} import *"


def _check_try(ctx):
    kinds = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t)
    for n in ctx.walk(*kinds):
        yield n.lineno, "try statement"


def _check_global(ctx):
    for n in ctx.walk(ast.Global, ast.Nonlocal):
        yield n.lineno, f"{type(n).__name__.lower()} {', '.join(n.names)}"


def _check_match(ctx):
    for n in ctx.walk(ast.Match):
        yield n.lineno, "match statement"


def _check_banned_builtin(ctx):
    # Scope-aware: `def forward(self, input)` or a local `vars = ...` binds a
    # name of the candidate's own; only a read that can reach the builtin
    # (module scope unbound, or bound only conditionally) is refused.
    for n in ctx.walk(ast.Name):
        if n.id in BANNED_BUILTINS and isinstance(n.ctx, ast.Load) and ctx.scopes.is_builtin(n):
            yield n.lineno, f"`{n.id}`"
    for node, attr, qual in ctx.events:
        if qual in DENY_PATHS and DENY_PATHS[qual] == "banned_builtin" or LEAF_DENY.get(attr) == "banned_builtin":
            yield node.lineno, f"`{qual or attr}`"


def _check_dynamic_getattr(ctx):
    for n in ctx.walk(ast.Name):
        if n.id not in ("getattr", "hasattr") or not ctx.scopes.is_builtin(n):
            continue
        call = ctx.parent(n)
        if not (isinstance(call, ast.Call) and call.func is n and _literal_getattr(call) is not None):
            yield n.lineno, f"`{n.id}` needs a string literal name"
    for node, attr, qual in ctx.events:
        if LEAF_DENY.get(attr) == "dynamic_getattr":
            yield node.lineno, f"`{attr}`"


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _check_internals(ctx):
    for n in ctx.nodes:
        if isinstance(n, ast.Name) and n.id in INTERNALS:
            yield n.lineno, f"`{n.id}`"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in INTERNALS:
            yield n.lineno, f"definition of `{n.name}`"
    for node, attr, qual in ctx.events:
        if attr in INTERNALS or attr in INTERNALS_ATTRS:
            yield node.lineno, f"`.{attr}`"


def _private_part(qual: str) -> str | None:
    """The first private `_x` component of an imported path after its root
    (`torch._C.foo` -> `_C`), or None. Dunders are the internals rule's."""
    parts = qual.split(".")
    for i in range(1, len(parts)):
        p = parts[i]
        if not p.startswith("_") or p == "_" or _is_dunder(p):
            continue
        if any(".".join(parts[:i]) + "." == ok for ok in PRIVATE_OK_UNDER):
            continue  # the op name itself, nothing below it
        return p
    return None


def _check_private(ctx):
    # Private names the candidate defines itself (`_relu_kernel`, `_BLOCK`,
    # `self._make_layer`, a class `_Impl`, a module-level `_cpp_src`) are its
    # own business. What is refused is a private member of a module the
    # candidate imports: torch._C, torch._dynamo, F._verify_batch_size ...
    # (from a Python value that is not a module, `x._foo` reaches that
    # object's own state only: covered by the judge's output checks).
    for node, attr, qual in ctx.events:
        if qual and qual not in PRIVATE_OK:
            part = _private_part(qual)
            if part is not None:
                yield node.lineno, f"`{qual}`"


def ctx_line(ctx, node) -> int:
    while node is not None and not hasattr(node, "lineno"):
        node = ctx.parent(node)
    return getattr(node, "lineno", 0)


def _module_alias_of(ctx, node) -> str | None:
    """X, where `node` is the one target of a module-level `node = X` (X a
    bare name); else None."""
    p = ctx.parent(node)
    if (isinstance(p, ast.Assign) and p in ctx.tree.body and len(p.targets) == 1
            and p.targets[0] is node and isinstance(p.value, ast.Name)):
        return p.value.id
    return None


def _model_new_alias(ctx, node) -> bool:
    """`ModelNew = SomeClass` at module level, SomeClass a module-level class
    of the candidate: KernelBench loads the attribute, an alias is fine."""
    value = _module_alias_of(ctx, node)
    return value in ctx.module_classes and value != "ModelNew"


def _self_alias(ctx, node) -> bool:
    """`ModelNew = ModelNew` at module level after `class ModelNew`: the same
    class bound to the same name (seen closing files that are also run as
    scripts); it changes nothing."""
    return _module_alias_of(ctx, node) == "ModelNew" and any(
        isinstance(n, ast.ClassDef) and n.name == "ModelNew" and n.lineno < node.lineno
        for n in ctx.tree.body)


def _check_model_new(ctx):
    sites = [(n, k) for n, k in ctx.bindings.get("ModelNew", [])
             if not (isinstance(n, ast.Name) and _self_alias(ctx, n))]
    defs = [n for n in ctx.tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    aliases = [n for n, _ in sites if isinstance(n, ast.Name) and _model_new_alias(ctx, n)]
    if not defs and not aliases:
        yield 1, "no module-level `class ModelNew` (nor `ModelNew = <a class of this module>`)"
    elif len(sites) != 1:
        yield (defs or aliases)[0].lineno, "`ModelNew` is bound more than once"


def _check_tensor_subclass(ctx):
    for n in ctx.walk(ast.ClassDef):
        for b in n.bases:
            q = ctx.qualname(b) or ""
            leaf = b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else ""
            if leaf in TENSOR_BASE_LEAVES or q.split(".")[-1] in TENSOR_BASE_LEAVES:
                yield n.lineno, f"class {n.name} derives from {q or leaf}"
    for n in ctx.nodes:
        name = (n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else
                n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None)
        if name in ("__torch_function__", "__torch_dispatch__"):
            yield n.lineno, f"`{name}`"
    for node, attr, qual in ctx.events:
        if LEAF_DENY.get(attr) == "tensor_subclass":
            yield node.lineno, f"`{attr}`"


def _check_class_base(ctx):
    for n in ctx.walk(ast.ClassDef):
        for b in n.bases:
            q = ctx.qualname(b)
            if isinstance(b, ast.Name) and (b.id == "object" and b.id not in ctx.bindings
                                            or b.id in ctx.module_classes and b.id != n.name):
                continue
            if q in ALLOWED_BASES:
                continue
            leaf = (q or "").split(".")[-1]
            if q and q.startswith("torch.nn.") and leaf not in TENSOR_BASE_LEAVES and "parameter" not in q:
                continue  # nn.Sequential, nn.ModuleList, ...
            if leaf in TENSOR_BASE_LEAVES:
                continue  # reported by tensor_subclass
            root = b
            while isinstance(root, ast.Attribute):
                root = root.value
            if q is None and isinstance(root, ast.Name) and root.id not in ctx.bindings:
                # `class ModelNew(nn.Module)` in a file that never imports nn
                # (a published solution did): say what is wrong.
                hint = " (import torch.nn as nn)" if root.id == "nn" else ""
                yield n.lineno, (f"class {n.name}({_segment(ctx, b) or '?'}): `{root.id}` is never "
                                 f"imported or defined in this file{hint}")
                continue
            yield n.lineno, f"class {n.name}({_segment(ctx, b) or '?'})"


def _check_class_keyword(ctx):
    for n in ctx.walk(ast.ClassDef):
        for k in n.keywords:
            yield n.lineno, f"class {n.name}(..., {k.arg or '**'}=...)"


# Classes the harness itself uses on the candidate's outputs in the candidate
# process (tensor methods, storages) and Triton's kernel objects (what the
# no_kernel ablation stubs). A function that receives one of these could
# patch it, so they may not be handled as plain values.
TRITON_WRAPPERS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
HARNESS_CLASS_LEAVES = TENSOR_BASE_LEAVES | frozenset({
    "Buffer", "Storage", "JITFunction", "Autotuner", "Heuristics", "KernelInterface",
})


class _HarnessObjects:
    """Which names and attributes may hold an object the harness stubs or
    inspects in the candidate process: the module returned by `load_inline`
    (the ablation replaces its entry points), `@triton.jit` kernels (the same
    for launches), and library tensor classes (the output checks call their
    methods). Tracked through assignments (`self.ext = ext`), returns and
    calls of the candidate's own functions; any other use as a plain value
    (in a container, as an argument to a library call, in a lambda) is an
    escape, because where it lands it could be patched unseen."""

    def __init__(self, ctx: "Context"):
        self.ctx = ctx
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.returning: set[str] = set()
        self.defs: dict[str, list] = {}
        self.assigned_attrs = {n.attr for n in ctx.walk(ast.Attribute) if isinstance(n.ctx, (ast.Store, ast.Del))}
        for n in ctx.walk(ast.FunctionDef, ast.AsyncFunctionDef):
            self.defs.setdefault(n.name, []).append(n)
            if any(_decorator_name(ctx, d) in TRITON_WRAPPERS for d in n.decorator_list):
                self.names.add(n.name)
        self.annotation_nodes = set()
        for a in annotations(ctx.nodes):
            self.annotation_nodes.update(id(x) for x in ast.walk(a))
        for _ in range(16):
            if not self._propagate():
                break

    # -- what holds such an object ---------------------------------------
    def tainted(self, e) -> bool:
        ctx = self.ctx
        if isinstance(e, ast.Name):
            return e.id in self.names
        if isinstance(e, ast.Attribute):
            return e.attr in self.attrs
        if isinstance(e, ast.Call):
            lit = _literal_getattr(e)
            if lit is not None:
                return lit in self.attrs
            if ctx.is_load_inline_call(e):
                return True
            if ctx.qualname(e.func) in TRITON_WRAPPERS:
                return True  # triton.jit(fn) outside a decorator
            if isinstance(e.func, ast.Call) and self.tainted(e.func):
                return True  # triton.autotune(...)(fn)
            callee = e.func.id if isinstance(e.func, ast.Name) else (
                e.func.attr if isinstance(e.func, ast.Attribute) else None)
            return callee in self.returning
        if isinstance(e, ast.IfExp):
            return self.tainted(e.body) or self.tainted(e.orelse)
        if isinstance(e, ast.BoolOp):
            return any(self.tainted(v) for v in e.values)
        if isinstance(e, ast.NamedExpr):
            return self.tainted(e.value)
        return False

    def _callee_params(self, call) -> list[tuple[int, ast.AST]] | None:
        """The candidate's own function a call certainly reaches, as (number
        of leading parameters the call does not pass, def), or None when it
        may reach something else (a library function that could store or
        patch its argument). Certain: `f(...)` with `f` bound only by one
        module-level def, or `self.m(...)` inside a class that defines `m`,
        with no attribute named `m` ever assigned."""
        ctx = self.ctx
        f = call.func
        if isinstance(f, ast.Name):
            sites = ctx.bindings.get(f.id, [])
            if (len(sites) == 1 and isinstance(sites[0][0], (ast.FunctionDef, ast.AsyncFunctionDef))
                    and sites[0][0] in ctx.tree.body):
                return [(0, sites[0][0])]
            return None
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"
                and f.attr not in self.assigned_attrs):
            fn = ctx.func_of.get(id(call))
            while isinstance(fn, ast.Lambda):
                fn = ctx.func_of.get(id(fn))
            cls = ctx.parent(fn) if fn is not None else None
            if isinstance(cls, ast.ClassDef):
                own = [d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == f.attr]
                if len(own) == 1:
                    d = own[0]
                    static = any(isinstance(x, ast.Name) and x.id == "staticmethod" for x in d.decorator_list)
                    return [(0 if static else 1, d)]
        return None

    def _bind_targets(self, targets) -> bool:
        """Track the names and attributes an assignment stores into (for
        `x[k] = ...`, the container `x`)."""
        changed = False
        for t in targets:
            if isinstance(t, (ast.Tuple, ast.List)):
                changed |= self._bind_targets(t.elts)
            elif isinstance(t, (ast.Starred, ast.Subscript)):
                changed |= self._bind_targets([t.value])
            elif isinstance(t, ast.Name) and t.id not in self.names:
                # Also as an attribute name: a class body's `e = ext` is `C.e`.
                self.names.add(t.id)
                self.attrs.add(t.id)
                changed = True
            elif isinstance(t, ast.Attribute) and t.attr not in self.attrs:
                self.attrs.add(t.attr)
                changed = True
        return changed

    def _propagate(self) -> bool:
        ctx = self.ctx
        changed = False
        for n in ctx.nodes:
            if isinstance(n, ast.Assign) and self.tainted(n.value):
                changed |= self._bind_targets(n.targets)
            elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None and self.tainted(n.value):
                changed |= self._bind_targets([n.target])
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if item.optional_vars is not None and self.tainted(item.context_expr):
                        changed |= self._bind_targets([item.optional_vars])
            elif isinstance(n, ast.Return) and n.value is not None and self.tainted(n.value):
                f = ctx.func_of.get(id(n))
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name not in self.returning:
                    self.returning.add(f.name)
                    changed = True
            elif isinstance(n, ast.Call):
                targets = self._callee_params(n)
                if targets is None:
                    continue
                for skip, d in targets:
                    params = d.args.posonlyargs + d.args.args
                    for i, a in enumerate(n.args):
                        if isinstance(a, ast.Starred) or not self.tainted(a):
                            continue
                        k = i + skip
                        name = params[k].arg if k < len(params) else (d.args.vararg.arg if d.args.vararg else None)
                        if name and name not in self.names:
                            self.names.add(name)
                            changed = True
                    for kw in n.keywords:
                        if kw.arg and self.tainted(kw.value) and kw.arg not in self.names:
                            self.names.add(kw.arg)
                            changed = True
        return changed

    # -- escapes -----------------------------------------------------------
    def _use_is_safe(self, e) -> bool:
        ctx = self.ctx
        p = ctx.parent(e)
        while isinstance(p, (ast.IfExp, ast.BoolOp)) and e is not getattr(p, "test", None):
            e, p = p, ctx.parent(p)
        if isinstance(p, ast.Attribute) and p.value is e:
            return True  # ext.fwd, kernel.fn read
        if isinstance(p, ast.Subscript) and p.value is e:
            return True  # kernel[grid]
        if isinstance(p, ast.Call):
            if p.func is e:
                return True
            if ctx.qualname(p.func) in TRITON_COMBINE_CALLS and e in p.args:
                return True  # tl.associative_scan(x, 0, combine): traced inside the kernel
            if _literal_getattr(p) is not None and p.args[0] is e:
                return True
            return self._callee_params(p) is not None  # tracked into the parameter
        if isinstance(p, ast.keyword):
            call = ctx.parent(p)
            if isinstance(call, ast.Call) and p.arg == "combine_fn" and \
                    ctx.qualname(call.func) in TRITON_COMBINE_CALLS:
                return True
            return isinstance(call, ast.Call) and self._callee_params(call) is not None
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Return)) and p.value is e:
            return True  # tracked into the target / the function's calls
        if isinstance(p, ast.withitem) and p.context_expr is e:
            return True
        if isinstance(p, (ast.Compare, ast.Expr, ast.If, ast.While, ast.Assert, ast.IfExp)):
            return True
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and e in p.decorator_list:
            return True  # @triton.autotune(...)
        if isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not):
            return True
        return False

    def escapes(self) -> Iterator[tuple[int, str]]:
        ctx = self.ctx
        for n in ctx.nodes:
            if isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
                continue
            if not isinstance(n, (ast.Name, ast.Attribute, ast.Call)):
                continue
            if self.tainted(n):
                if not self._use_is_safe(n):
                    yield n.lineno, f"`{_segment(ctx, n) or '?'}` (a load_inline extension or Triton kernel) used as a value"
                continue
            if isinstance(n, ast.Call) and _literal_getattr(n) is None:
                continue
            q = ctx.qualname(n)
            leaf = (q or "").split(".")[-1]
            if not q or not (leaf in HARNESS_CLASS_LEAVES or leaf.endswith("Storage")):
                continue
            if id(n) in self.annotation_nodes:
                continue
            p = ctx.parent(n)
            if isinstance(p, ast.Attribute) and p.value is n:
                continue  # torch.Tensor.add (a read; writing it is refused below)
            if isinstance(p, ast.Call) and (p.func is n or _literal_getattr(p) is not None):
                continue
            if isinstance(p, ast.Tuple):
                p = ctx.parent(p)
            if (isinstance(p, ast.Call) and isinstance(p.func, ast.Name)
                    and p.func.id in ("isinstance", "issubclass") and ctx.scopes.is_builtin(p.func)):
                continue
            if isinstance(p, ast.ClassDef):
                continue  # a base: the tensor_subclass rule's
            yield n.lineno, f"the tensor class `{q}` used as a value"


def _write_chain(ctx, target):
    """(root expression, attribute names between the root and the written
    attribute) of an attribute target such as `self.conv.weight.data`."""
    hops = []
    b = target.value
    while True:
        if isinstance(b, ast.Attribute):
            hops.append(b.attr)
            b = b.value
        elif isinstance(b, ast.Subscript):
            b = b.value
        elif isinstance(b, ast.Call) and _literal_getattr(b) is not None:
            hops.append(_literal_getattr(b))
            b = b.args[0]
        else:
            return b, hops


def _check_attribute_assignment(ctx):
    # Threat: monkeypatching objects the candidate did not create -- torch,
    # triton and numpy modules and classes (F.relu = ..., torch.Tensor.add =
    # ..., torch.backends.cudnn.x = ...), the load_inline extension and
    # Triton kernels -- which the harness code in the candidate process uses
    # to stub entry points (the no_kernel ablation) and to check outputs.
    # The candidate's own objects are fair game: `self.x = ...`,
    # `self.conv.weight.data = ...`, a local module's `conv.bias = None`,
    # `ctx.saved = ...`, attributes of its own classes. Modules never become
    # values (module_as_value), library tensor classes, extensions and
    # kernels are tracked (_HarnessObjects), so a write through a name the
    # candidate bound reaches one of them only if that name is tracked.
    # Patching a library class the harness does not use (nn.GELU.forward)
    # changes only the candidate's own computation, which the judge checks.
    harness = _HarnessObjects(ctx)
    yield from harness.escapes()
    for n in ctx.walk(ast.Attribute):
        if not isinstance(n.ctx, (ast.Store, ast.Del)):
            continue
        verb = "delete" if isinstance(n.ctx, ast.Del) else "assign"
        if ctx.qualname(n) or ctx.qualname(n.value):
            yield n.lineno, f"{verb} `{_segment(ctx, n)}` (a module or class the candidate did not create)"
            continue
        root, hops = _write_chain(ctx, n)
        if (isinstance(root, ast.Name) and root.id in harness.names) or any(h in harness.attrs for h in hops) \
                or (isinstance(root, ast.Call) and harness.tainted(root)):
            yield n.lineno, f"{verb} `{_segment(ctx, n)}` (into a load_inline extension or Triton kernel)"
    for n in ctx.walk(ast.Subscript):
        if isinstance(n.ctx, (ast.Store, ast.Del)) and ctx.qualname(n.value):
            yield n.lineno, f"item assignment on `{_segment(ctx, n.value)}`"
    for n in ctx.walk(ast.Call):
        f = n.func
        if (isinstance(f, ast.Attribute) and f.attr in MUTATING_METHODS
                and ctx.qualname(f.value) and ctx.qualname(f.value) not in KNOWN_MODULES):
            yield n.lineno, f"`{_segment(ctx, f)}` mutates module state"


def _check_class_attribute_access(ctx):
    classes = {**ctx.module_classes, **ctx.class_aliases}
    for n in ctx.walk(ast.Attribute):
        if not (isinstance(n.value, ast.Name) and n.value.id in classes):
            continue
        cls = classes[n.value.id]
        for item in cls.body:
            if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == n.attr
                    and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in item.decorator_list)):
                call = ctx.parent(n)
                if (n.attr == "__init__" and isinstance(call, ast.Call) and call.func is n and call.args
                        and isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
                    break
                yield n.lineno, f"`{n.value.id}.{n.attr}` (call methods on instances)"
                break


def _decorator_name(ctx, d) -> str | None:
    target = d.func if isinstance(d, ast.Call) else d
    q = ctx.qualname(target)
    if q:
        return q
    if isinstance(target, ast.Name) and target.id not in ctx.bindings:
        return target.id
    return None


def _check_decorators(ctx):
    for n in ctx.walk(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        for d in n.decorator_list:
            q = _decorator_name(ctx, d)
            if q in ALLOWED_DECORATORS or (q or "").startswith("functools."):
                continue
            yield d.lineno, f"@{_segment(ctx, d) or '?'}"


def _check_string_annotation(ctx):
    for a in annotations(ctx.nodes):
        for sub in ast.walk(a):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                yield sub.lineno, f"annotation {sub.value!r}"
                break


def _check_banned_module(ctx):
    for node, attr, qual in ctx.events:
        if attr in BANNED_MODULES:
            yield node.lineno, f"`{qual or attr}`"
        elif attr in ALLOWED_ROOTS and qual not in REEXPORT_EXCEPTIONS:
            yield node.lineno, f"`{qual or attr}` reaches a module through another one"
    for n in ctx.walk(ast.Import):
        for a in n.names:
            if a.name.split(".")[0] in BANNED_MODULES:
                yield n.lineno, f"import {a.name}"
    for n in ctx.walk(ast.ImportFrom):
        if n.module and n.module.split(".")[0] in BANNED_MODULES:
            yield n.lineno, f"from {n.module}"


def _check_module_as_value(ctx):
    def used_as_root(n):
        p = ctx.parent(n)
        if isinstance(p, ast.Attribute) and p.value is n:
            return True
        return isinstance(p, ast.Call) and _literal_getattr(p) is not None and p.args[0] is n
    for n in ctx.walk(ast.Name):
        if isinstance(n.ctx, ast.Load) and n.id in ctx.module_aliases and not used_as_root(n):
            yield n.lineno, f"module `{n.id}` used as a value"
    for n in ctx.walk(ast.Attribute):
        if isinstance(n.ctx, ast.Load) and ctx.qualname(n) in KNOWN_MODULES and not used_as_root(n):
            p = ctx.parent(n)
            if isinstance(p, ast.Attribute):
                continue
            yield n.lineno, f"module `{ctx.qualname(n)}` used as a value"


def _private_generator(ctx, node, attr, qual) -> bool:
    """`torch.Generator(...)` called, or `.manual_seed(...)` on such a call
    (`g = torch.Generator().manual_seed(SEED)`): a generator of the
    candidate's own for its weights. It neither sets nor reads the global
    RNG, and the judge draws inputs from a secret seed in its own process."""
    if attr == "Generator" and qual == "torch.Generator":
        p = ctx.parent(node)
        return isinstance(p, ast.Call) and p.func is node
    if attr == "manual_seed" and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
        return ctx.qualname(node.value.func) == "torch.Generator"
    return False


def _path_rule_hits(ctx, rule_id):
    for node, attr, qual in ctx.events:
        if rule_id == "seeding" and _private_generator(ctx, node, attr, qual):
            continue
        hit = False
        if qual:
            for p, r in DENY_PATHS.items():
                if r == rule_id and (qual == p or qual.startswith(p + ".")):
                    hit = True
            for ns, (allowed, r) in NAMESPACE_ALLOW.items():
                if r == rule_id and qual.startswith(ns + "."):
                    child = qual[len(ns) + 1:].split(".")[0]
                    if child not in allowed:
                        hit = True
        if LEAF_DENY.get(attr) == rule_id:
            hit = True
        if hit:
            yield node.lineno, f"`{qual or attr}`"


def _path_check(rule_id):
    def check(ctx):
        return _path_rule_hits(ctx, rule_id)
    return check


FRAME_ATTRS = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace",
    "tb_frame", "tb_next", "co_code", "co_consts", "co_names", "func_globals", "func_code",
})


def _check_frame_access(ctx):
    for node, attr, qual in ctx.events:
        if attr in FRAME_ATTRS:
            yield node.lineno, f"`.{attr}`"


def _compared_only(ctx, node) -> bool:
    """`node` (a dtype such as torch.float16) is an operand of a comparison,
    alone or in a literal tuple/list/set (`x.dtype in (torch.float16,
    torch.bfloat16)`, `x.dtype != torch.half`): a test, nothing is cast."""
    p = ctx.parent(node)
    while isinstance(p, (ast.Tuple, ast.List, ast.Set)):
        node, p = p, ctx.parent(p)
    return isinstance(p, ast.Compare) and (node is p.left or any(node is c for c in p.comparators))


LOW_DTYPES = frozenset({"half", "float16", "bfloat16"})


def _low_dtype_branches(ctx) -> set:
    """Ids of the nodes in the body (not the else) of every `if` whose test
    is `<expr>.dtype == <low dtype>` or `<expr>.dtype in (<low dtypes>)`:
    code for inputs that already are half/bfloat16. Under strict tolerance
    the task's inputs are float32, and making a low-precision tensor to
    reach the branch needs a cast that is refused outside such a body."""
    out = set()
    for n in ctx.walk(ast.If):
        t = n.test
        if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.Is, ast.In))
                and isinstance(t.left, ast.Attribute) and t.left.attr == "dtype"):
            continue
        right = t.comparators[0]
        if not isinstance(t.ops[0], ast.In):
            elts = [right]
        elif isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            elts = right.elts
        else:
            elts = []
        if elts and all(isinstance(e, ast.Attribute) and e.attr in LOW_DTYPES for e in elts):
            for stmt in n.body:
                out.update(id(x) for x in ast.walk(stmt))
    return out


def _check_precision(ctx):
    if not ctx.strict:
        return
    low_branches = _low_dtype_branches(ctx)
    for node, attr, qual in ctx.events:
        if attr in PRECISION_LEAVES and id(node) not in low_branches and not _compared_only(ctx, node):
            yield node.lineno, f"`{qual or attr}`"
    for n in ctx.walk(ast.Call):
        if id(n) in low_branches:
            continue
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        if "allow_tf32" in kw and not (isinstance(kw["allow_tf32"], ast.Constant) and kw["allow_tf32"].value is False):
            yield n.lineno, "allow_tf32"
        ip = kw.get("input_precision")
        if ip is not None and not (isinstance(ip, ast.Constant) and ip.value in ("ieee", "tf32x3")):
            yield n.lineno, "input_precision other than 'ieee'/'tf32x3'"
        q = ctx.qualname(n.func) or ""
        if q in ("triton.language.dot",) and "allow_tf32" not in kw and "input_precision" not in kw:
            yield n.lineno, "tl.dot defaults to TF32: pass input_precision=\"ieee\" (or allow_tf32=False)"
        if isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "type"):
            for a in list(n.args) + list(kw.values()):
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and any(
                        s in a.value.lower() for s in ("half", "float16", "bfloat16", "int8")):
                    yield n.lineno, f".{n.func.attr}({a.value!r})"


def _check_load_inline_usage(ctx):
    for n in ctx.walk(ast.Name, ast.Attribute):
        if isinstance(n.ctx, ast.Load) and ctx.qualname(n) == LOAD_INLINE:
            p = ctx.parent(n)
            if not (isinstance(p, ast.Call) and p.func is n):
                yield n.lineno, "`load_inline` must be called directly"


def _load_inline_findings(rule_id):
    def check(ctx):
        for f in ctx.load_inline_findings:
            if f.rule == rule_id:
                yield f.line, f.detail
    return check
