"""load_inline, read without running the candidate: its arguments resolved
statically (the sources, the function list, the flags) and the compiler
flags judged."""
from __future__ import annotations

import ast
import re
import string

from korch_native import _native_identifier_hits
from korch_policy_tables import LOAD_INLINE_ALLOWED, LOAD_INLINE_PARAMS
from korch_rule_types import Finding


# ---------------------------------------------------------------------------
# Static resolution of load_inline arguments
# ---------------------------------------------------------------------------

class Unresolved(Exception):
    pass


_SCALARS = (str, int, float, bool, type(None))


class _Resolver:
    def __init__(self, ctx, call: ast.Call):  # ctx: korch_context.Context
        self.ctx = ctx
        self.call = call
        self.scope = ctx.func_of.get(id(call))
        self.active: set[str] = set()

    def value(self, node, depth=0):
        if depth > 64:
            raise Unresolved("expression is nested too deeply")
        v = lambda x: self.value(x, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant):
            if isinstance(node.value, _SCALARS):
                return node.value
            raise Unresolved(f"constant of type {type(node.value).__name__}")
        if isinstance(node, (ast.List, ast.Tuple)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = v(e.value)
                    if not isinstance(inner, (list, tuple)):
                        raise Unresolved("starred element is not a list")
                    out.extend(inner)
                else:
                    out.append(v(e))
            return out if isinstance(node, ast.List) else tuple(out)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unresolved("dict unpacking")
            return {v(k): v(val) for k, val in zip(node.keys, node.values)}
        if isinstance(node, ast.JoinedStr):
            parts = []
            for p in node.values:
                if isinstance(p, ast.Constant):
                    parts.append(p.value)
                elif isinstance(p, ast.FormattedValue):
                    x = v(p.value)
                    if not isinstance(x, (str, int, float, bool)):
                        raise Unresolved("f-string field is not a scalar constant")
                    if p.conversion == ord("r"):
                        x = repr(x)
                    elif p.conversion == ord("a"):
                        x = ascii(x)
                    elif p.conversion == ord("s"):
                        x = str(x)
                    spec = v(p.format_spec) if p.format_spec is not None else ""
                    parts.append(format(x, spec))
                else:
                    raise Unresolved("f-string part")
            return "".join(parts)
        if isinstance(node, ast.BinOp):
            left, right = v(node.left), v(node.right)
            if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, (str, list, tuple, int)):
                return left + right
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                if isinstance(right, (list, dict)) or (isinstance(right, tuple) and not all(isinstance(x, _SCALARS) for x in right)):
                    raise Unresolved("%-formatting arguments")
                return left % right
            raise Unresolved(f"operator {type(node.op).__name__}")
        if isinstance(node, ast.Name):
            return self.name(node, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not any(
                isinstance(a, ast.Starred) for a in node.args):
            meth = node.func.attr
            if meth == "join" and len(node.args) == 1 and not node.keywords:
                sep, items = v(node.func.value), v(node.args[0])
                if isinstance(sep, str) and isinstance(items, (list, tuple)) and all(isinstance(i, str) for i in items):
                    return sep.join(items)
                raise Unresolved("join over non-strings")
            if meth == "format":
                fmt = v(node.func.value)
                if not isinstance(fmt, str):
                    raise Unresolved("format on a non-string")
                for _, field, _, _ in string.Formatter().parse(fmt):
                    if field and any(c in field for c in ".["):
                        raise Unresolved("format field with attribute or index access")
                args = [v(a) for a in node.args]
                kwargs = {}
                for k in node.keywords:
                    if k.arg is None:
                        raise Unresolved("format(**...)")
                    kwargs[k.arg] = v(k.value)
                if not all(isinstance(x, _SCALARS) for x in list(args) + list(kwargs.values())):
                    raise Unresolved("format arguments are not scalar constants")
                return fmt.format(*args, **kwargs)
        raise Unresolved(f"{type(node).__name__} expression")

    def name(self, node: ast.Name, depth):
        sites = self.ctx.bindings.get(node.id, [])
        if len(sites) != 1:
            raise Unresolved(f"`{node.id}` is {'never bound' if not sites else 'bound more than once'}")
        site, scope = sites[0]
        if scope is not None and scope is not self.scope:
            raise Unresolved(f"`{node.id}` is bound in another function")
        assign = self.ctx.parent(site)
        if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and assign.targets[0] is site:
            value_node = assign.value
        elif isinstance(assign, ast.AnnAssign) and assign.target is site and assign.value is not None:
            value_node = assign.value
        else:
            raise Unresolved(f"`{node.id}` is not bound by a plain assignment")
        if node.id in self.active:
            raise Unresolved(f"`{node.id}` refers to itself")
        self.active.add(node.id)
        try:
            value = self.value(value_node, depth + 1)
        finally:
            self.active.discard(node.id)
        if isinstance(value, (list, dict)):
            self._check_no_escape(node.id)
        return value

    def _check_no_escape(self, name):
        """A list/dict bound to a name could be mutated later: only allow uses
        that copy it or hand it to load_inline."""
        for n in self.ctx.walk(ast.Name):
            if n.id != name or not isinstance(n.ctx, ast.Load):
                continue
            p = self.ctx.parent(n)
            ok = False
            if isinstance(p, ast.keyword):
                ok = self.ctx.is_load_inline_call(self.ctx.parent(p))
            elif isinstance(p, ast.Call):
                ok = self.ctx.is_load_inline_call(p) or (
                    isinstance(p.func, ast.Attribute) and p.func.attr == "join")
            elif isinstance(p, (ast.BinOp, ast.FormattedValue)):
                ok = True
            elif isinstance(p, ast.Starred):
                ok = isinstance(self.ctx.parent(p), (ast.List, ast.Tuple))
            if not ok:
                raise Unresolved(f"list `{name}` is used where it could be changed (line {n.lineno})")


def _as_str_list(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return list(value)
    raise Unresolved(f"{what} must be a string or a list of strings")


def _resolve_load_inline_call(ctx, call: ast.Call):  # ctx: korch_context.Context
    findings: list[Finding] = []
    line = call.lineno

    def fail(rule, detail):
        findings.append(Finding(rule, line, detail))

    args: dict[str, ast.AST] = {}
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            fail("load_inline_dynamic", "load_inline(*args): arguments must be written out")
            return None, findings
        if i >= len(LOAD_INLINE_PARAMS):
            fail("load_inline_argument", "too many positional arguments")
            return None, findings
        args[LOAD_INLINE_PARAMS[i]] = a
    for k in call.keywords:
        if k.arg is None:
            fail("load_inline_dynamic", "load_inline(**kwargs): arguments must be written out")
            return None, findings
        args[k.arg] = k.value
    for k in args:
        if k not in LOAD_INLINE_ALLOWED:
            fail("load_inline_argument", f"argument `{k}` is not allowed")
    resolver = _Resolver(ctx, call)
    resolved = {}
    for k in ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags",
              "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "with_cuda", "verbose"):
        if k not in args:
            resolved[k] = None
            continue
        try:
            resolved[k] = resolver.value(args[k])
        except Unresolved as e:
            fail("load_inline_dynamic", f"argument `{k}` cannot be resolved statically: {e}")
            resolved[k] = Unresolved
    if any(v is Unresolved for v in resolved.values()):
        return None, findings
    entry = {"lineno": line}
    try:
        name = resolved["name"]
        if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
            raise Unresolved("`name` must be a Python identifier")
        entry["name"] = name
        entry["cpp_sources"] = _as_str_list(resolved["cpp_sources"], "cpp_sources")
        entry["cuda_sources"] = _as_str_list(resolved["cuda_sources"], "cuda_sources")
        funcs = resolved["functions"]
        if isinstance(funcs, dict):
            funcs = list(funcs.keys())
        funcs = _as_str_list(funcs, "functions")
        if not funcs:
            # Refused, but the sources and flags are still checked, so that
            # one answer names every fix (a hand-written PYBIND11_MODULE
            # usually comes with it).
            fail("load_inline_argument", "`functions=[...]` must list the entry points")
        for f in funcs:
            if not (f.isidentifier() and f.isascii()):
                raise Unresolved(f"function name {f!r} is not an identifier")
        entry["functions"] = funcs
        for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
            v = resolved[k]
            if isinstance(v, str):
                raise Unresolved(f"`{k}` must be a list of strings")
            # KernelBench's own example passes extra_cflags=[""]: empty
            # entries carry nothing and are dropped.
            entry[k] = [f for f in _as_str_list(v, k) if f != ""]
        if _as_str_list(resolved["extra_include_paths"], "extra_include_paths"):
            raise Unresolved("`extra_include_paths` must be empty")
        wc = resolved["with_cuda"]
        if wc is not None and not isinstance(wc, bool):
            raise Unresolved("`with_cuda` must be True, False or None")
        if resolved["verbose"] is not None and not isinstance(resolved["verbose"], bool):
            raise Unresolved("`verbose` must be a bool")
        entry["with_cuda"] = bool(entry["cuda_sources"]) if wc is None else wc
        if not entry["cpp_sources"] and not entry["cuda_sources"]:
            raise Unresolved("no sources")
    except Unresolved as e:
        fail("load_inline_argument", str(e))
        return None, findings
    ordered = {k: entry[k] for k in ("name", "cpp_sources", "cuda_sources", "functions",
                                     "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                                     "with_cuda", "lineno")}
    return ordered, findings


# ---------------------------------------------------------------------------
# Compiler flags
# ---------------------------------------------------------------------------

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_FLAG_PATTERNS = [
    r"-O[0-3]",
    r"--?std=c\+\+(14|17|20)",
    rf"-D{_IDENT}(=[A-Za-z0-9_.+\-]*)?",
    rf"-U{_IDENT}",
    r"-march=native",
    r"-mavx[0-9a-z_]*",
    r"-mfma",
    r"-funroll-loops",
    r"-fPIC",
    r"-w",
    r"-W(no-)?[a-z][a-z0-9\-]*(=[0-9]+)?",
    r"-lineinfo",
    r"-g[0-3]?",
    r"--?(Xptxas|ptxas-options)=-v",
    r"--?maxrregcount=[0-9]+",
    r"(-arch|--gpu-architecture)=(sm|compute)_[0-9]{2,3}[a-z]?",
    r"-gencode=?arch=compute_[0-9]{2,3}[a-z]?,code=\[?(sm|compute)_[0-9]{2,3}[a-z]?(,(sm|compute)_[0-9]{2,3}[a-z]?)*\]?",
    r"arch=compute_[0-9]{2,3}[a-z]?,code=\[?(sm|compute)_[0-9]{2,3}[a-z]?(,(sm|compute)_[0-9]{2,3}[a-z]?)*\]?",
    r"-gencode",
    r"--expt-relaxed-constexpr",
    r"--extended-lambda",
    r"--expt-extended-lambda",
]
# The toolkit's own math libraries by name (no -L, no paths): what the
# library may then call is still decided by the undefined-symbol allowlist.
LDFLAGS_ALLOWED = frozenset({"-lcublas", "-lcublasLt", "-lcurand",
                             "-lcudart"})  # (torch links the CUDA runtime into every CUDA extension anyway)
# ... and flags that change only debug info or the optimisation level.
_LDFLAGS_HARMLESS = [r"-g[0-3]?", r"-O[0-3s]?"]
_FAST_MATH = [r"--?use_fast_math", r"-ffast-math", r"--?ftz=true", r"--?prec-div=false",
              r"--?prec-sqrt=false"]
_PRECISE_MATH = [r"--?ftz=false", r"--?prec-div=true", r"--?prec-sqrt=true", r"--?fmad=(true|false)"]


def check_flags(kind: str, flags: list[str], strict: bool) -> list[Finding]:
    """Findings for one flag list (kind: extra_cflags | extra_cuda_cflags | extra_ldflags)."""
    out = []
    if kind == "extra_ldflags":
        for f in flags:
            if f not in LDFLAGS_ALLOWED and not any(re.fullmatch(p, f) for p in _LDFLAGS_HARMLESS):
                out.append(Finding("compiler_flag", 0, f"linker flag {f!r} (extra_ldflags may name only "
                                                       f"{', '.join(sorted(LDFLAGS_ALLOWED))})"))
        return out
    for i, f in enumerate(flags):
        if any(re.fullmatch(p, f) for p in _FAST_MATH):
            if strict:
                out.append(Finding("fast_math_strict", 0, f"{f} under tolerance 'strict'"))
            continue
        if any(re.fullmatch(p, f) for p in _FLAG_PATTERNS + _PRECISE_MATH):
            if f == "-gencode" and not (i + 1 < len(flags) and flags[i + 1].startswith("arch=")):
                out.append(Finding("compiler_flag", 0, "-gencode without arch=...,code=..."))
            if f.startswith("arch=") and not (i > 0 and flags[i - 1] == "-gencode"):
                out.append(Finding("compiler_flag", 0, f"{f!r} outside -gencode"))
            m = re.fullmatch(rf"-D{_IDENT}=({_IDENT})", f)
            if m:
                for rule, detail in _native_identifier_hits(m.group(1), None, None, strict):
                    out.append(Finding("compiler_flag", 0, f"{f}: macro value {detail} ({rule})"))
            continue
        out.append(Finding("compiler_flag", 0, f"{kind}: {f!r} is not on the allowlist"))
    return out


def _check_flag_units(rule_id):
    def check(ctx):
        for u in ctx.flag_units:
            for f in check_flags(u["kind"], u["flags"], ctx.strict):
                if f.rule == rule_id:
                    yield u["line"], f.detail
    return check
