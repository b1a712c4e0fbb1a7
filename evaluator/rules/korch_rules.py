#!/usr/bin/python3
"""korch's static rule stage (DESIGN.md section 5, stage 1).

Trusted code: it never imports or runs the candidate. The candidate module is
parsed with Python's own `ast` (never regexes or a tokenizer: f-string
expressions, NFKC-normalised identifiers such as `ｅｖａｌ` and Python 3.12's
f-string grammar defeat those). The C++/CUDA sources handed to `load_inline`
are text, not Python: they go through a small C lexer that splices lines and
strips comments and literals before identifier checks. After compiling, the
built library's undefined dynamic symbols are checked against an allowlist
(`check_symbols`, `undefined_symbols`), because macros can spell names the
source rules never see.

Public API (stable; the compile worker and the rule worker call these):

    check(source, *, tolerance="strict", torch_ops="allow") -> dict
    check_symbols(undefined_symbols, allow_extra=()) -> list[dict]
    undefined_symbols(so_path) -> list[str]
    needed_libraries(so_path) -> list[str]
    rule_table() -> list[dict]          # [{"id", "message", "stage"}]
    RULES                               # the table itself (Rule dataclasses)

Every rule has a stable id, a one-line message and a check. Violations are
{"rule": id, "message": str, "line": int} with `line` the Python line (for
native-source rules, the line of the `load_inline` call; the message names
the native line).

The worker must write the candidate file as exactly `source.encode("utf-8")`:
the rules parse those bytes, so a coding cookie is honoured the same way the
import will honour it (and a non-UTF-8 cookie is itself a violation).

Runs on Python 3.11 and 3.12 with the standard library only.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import string
import sys
import unicodedata
from typing import Callable, Iterable, Iterator



def _sibling(name: str):
    """A module beside this file, by path: `korch lint` runs this file with
    `python3 -I` (isolated: its folder is not on sys.path), the worker and
    the tests import it from a folder that is."""
    if name in sys.modules:
        return sys.modules[name]
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# The ELF reader (korch_elf.py, beside this file): re-exported, since the
# worker and the tests read symbols through this module.
_elf = _sibling("korch_elf")
ElfError = _elf.ElfError
needed_libraries = _elf.needed_libraries
undefined_symbols = _elf.undefined_symbols
undefined_symbols_of_objects = _elf.undefined_symbols_of_objects

RULES_VERSION = "4"  # 4: stop 32 (pybind11 argument casters); 2: stop 30 (held-out false rejections; defines_model retired)
# 3: exit/_exit/_Exit/quick_exit allowed in native code (a runner that exits is already an
#    error verdict); Triton combine functions (tl.associative_scan / tl.reduce); the symbol
#    verdict cached with a build is re-checked when this file changes

TOLERANCES = ("strict", "tf32", "fp16", "bf16")
TORCH_OPS_POLICIES = ("allow", "forbid")

# ---------------------------------------------------------------------------
# Policy tables (data, not code). Python-side names are matched on the AST's
# NFKC-normalised identifiers.
# ---------------------------------------------------------------------------

ALLOWED_IMPORTS = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.utils.cpp_extension",
    "triton", "triton.language", "math", "numpy", "typing", "functools",
    "itertools", "operator", "collections", "dataclasses", "enum",
})
# Submodules of triton.language (libdevice lives there in Triton 3).
ALLOWED_IMPORT_PREFIXES = ("triton.language.",)

# Top-level modules reachable by import; reaching one of them again through an
# attribute (`F.torch`, `torch.os`) is a re-export and is refused.
ALLOWED_ROOTS = frozenset({
    "torch", "numpy", "triton", "math", "typing", "functools", "itertools",
    "operator", "collections", "dataclasses", "enum",
})
REEXPORT_EXCEPTIONS = frozenset({"triton.language.math"})

# Module names that must never appear as an attribute, import or literal
# getattr name, however they are reached.
BANNED_MODULES = frozenset({
    "sys", "os", "posix", "nt", "builtins", "inspect", "gc", "ctypes",
    "importlib", "pickle", "cPickle", "marshal", "subprocess", "socket",
    "threading", "multiprocessing", "signal", "io", "pathlib", "shutil",
    "tempfile", "mmap", "fcntl", "resource", "platform", "sysconfig", "site",
    "runpy", "codeop", "pty", "asyncio", "concurrent", "urllib", "http",
    "ftplib", "requests", "zipimport", "pkgutil", "linecache", "traceback",
    "types", "copyreg", "shelve", "dbm", "sqlite3", "glob", "tarfile",
    "zipfile", "webbrowser", "faulthandler", "tracemalloc", "atexit", "ssl",
    "imp", "distutils", "setuptools", "random", "contextlib", "ctypeslib",
    "selectors", "socketserver", "xmlrpc", "smtplib", "telnetlib",
})

# Names of modules that can be used as values are tracked so that a module
# object never escapes into a variable, container or argument.
KNOWN_MODULES = ALLOWED_IMPORTS | frozenset({
    "torch.cuda", "torch.linalg", "torch.fft", "torch.special",
    "torch.autograd", "torch.nn.init", "torch.nn.modules", "torch.nn.parameter",
    "torch.nn.utils", "torch.sparse", "torch.distributions", "torch.testing",
    "torch.amp", "torch.cuda.amp", "torch.random", "torch.backends",
    "torch.jit", "torch.utils", "torch.ops", "torch.library", "torch.fx",
    "torch.func", "torch.cuda.memory", "torch.profiler", "torch.hub",
    "torch.multiprocessing", "torch.distributed", "torch.serialization",
    "numpy.linalg", "numpy.random", "numpy.fft", "numpy.lib", "numpy.core",
    "numpy.ma", "triton.language.math", "triton.language.extra",
    "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
    "triton.language.extra.libdevice", "triton.runtime", "triton.compiler",
    "triton.testing",
})

# Builtins that evaluate code, reach namespaces or bypass attribute rules.
# Refused only where the name resolves to the builtin: a parameter, local or
# module-level binding of the same name (`forward(self, input)`) shadows it.
BANNED_BUILTINS = frozenset({
    "exec", "eval", "compile", "open", "__import__", "globals", "locals",
    "vars", "breakpoint", "input", "setattr", "delattr", "type", "help",
    "exit", "quit", "memoryview",
})

# Dunder names and attributes that reach interpreter internals: the class
# graph (`().__class__.__bases__[0].__subclasses__()` walks to os), function
# globals, code and closures, the builtins namespace, generic attribute
# access that bypasses the static attribute rules, mutable function
# defaults, module loaders. Refused wherever they appear (attribute, name,
# literal getattr, definition). Other dunders (`__name__`, `__init__`,
# `__call__`, `__version__` ...) reach nothing and are allowed.
INTERNALS = frozenset({
    "__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__dict__", "__code__", "__closure__", "__func__", "__self__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__import__",
    "__build_class__", "__loader__", "__spec__", "__path__", "__defaults__",
    "__kwdefaults__", "__reduce__", "__reduce_ex__", "__traceback__", "__thisclass__",
    "__objclass__", "__self_class__", "__init_subclass__", "__class_getitem__",
})
# Plain attribute names with the same reach: `type.mro()` lists base classes.
INTERNALS_ATTRS = frozenset({"mro"})

# Where a private `_x` member of a library module is nothing but an operator
# name: `torch.ops.aten._softmax` calls the ATen op, it reaches no internals.
PRIVATE_OK_UNDER = ("torch.ops.aten.",)
# Private library functions that only compute from a tensor's shape, which
# models copy from nn.Linear / nn.Conv*.reset_parameters to initialise their
# own weights: they change no state and register nothing.
PRIVATE_OK = frozenset({
    "torch.nn.init._calculate_fan_in_and_fan_out",
    "torch.nn.init._calculate_correct_fan",
})

# Qualified paths (after alias resolution) and the rule each belongs to.
DENY_PATHS: dict[str, str] = {
    # threads and processes
    "torch.multiprocessing": "threads_processes",
    "torch.distributed": "threads_processes",
    "torch.futures": "threads_processes",
    "torch.set_num_threads": "threads_processes",
    "torch.set_num_interop_threads": "threads_processes",
    # streams, events, graphs
    "torch.cuda.stream": "streams_events_graphs",
    "torch.cuda.streams": "streams_events_graphs",
    "torch.cuda.graph": "streams_events_graphs",
    "torch.cuda.graphs": "streams_events_graphs",
    "torch.cuda.Event": "streams_events_graphs",
    "torch.Stream": "streams_events_graphs",
    "torch.Event": "streams_events_graphs",
    # compilers and tracers
    "torch.compile": "compile_jit",
    "torch.jit": "compile_jit",
    "torch.fx": "compile_jit",
    "torch.export": "compile_jit",
    "torch.cuda.jiterator": "compile_jit",
    "torch.backends": "torch_backends",
    "torch.profiler": "profiler",
    "torch.autograd.profiler": "profiler",
    "torch.cuda.profiler": "profiler",
    "torch.cuda.cudart": "profiler",
    # custom operators and native loading
    "torch.library": "custom_op_registration",
    "torch.ops.load_library": "custom_op_registration",
    "torch.ops.import_module": "custom_op_registration",
    "torch.classes": "custom_op_registration",
    "torch.overrides": "custom_op_registration",
    # files, OS, network
    "torch.save": "file_os_network",
    "torch.load": "file_os_network",
    "torch.from_file": "file_os_network",
    "torch.serialization": "file_os_network",
    "torch.hub": "file_os_network",
    "torch.package": "file_os_network",
    "torch.onnx": "file_os_network",
    "torch.cuda.tunable": "file_os_network",
    "torch.compiler": "compile_jit",
    "numpy.load": "file_os_network",
    "numpy.save": "file_os_network",
    "numpy.savez": "file_os_network",
    "numpy.savez_compressed": "file_os_network",
    "numpy.savetxt": "file_os_network",
    "numpy.loadtxt": "file_os_network",
    "numpy.genfromtxt": "file_os_network",
    "numpy.fromfile": "file_os_network",
    "numpy.fromregex": "file_os_network",
    "numpy.memmap": "file_os_network",
    "numpy.ctypeslib": "file_os_network",
    "numpy.DataSource": "file_os_network",
    "numpy.lib": "file_os_network",
    "numpy.core": "file_os_network",
    "numpy.distutils": "file_os_network",
    "numpy.f2py": "file_os_network",
    "numpy.testing": "file_os_network",
    # seeding (predicting inputs)
    "torch.manual_seed": "seeding",
    "torch.seed": "seeding",
    "torch.initial_seed": "seeding",
    "torch.random": "seeding",
    "torch.Generator": "seeding",
    "torch.get_rng_state": "seeding",
    "torch.set_rng_state": "seeding",
    "torch.cuda.manual_seed": "seeding",
    "torch.cuda.manual_seed_all": "seeding",
    "torch.cuda.seed": "seeding",
    "torch.cuda.seed_all": "seeding",
    "torch.cuda.random": "seeding",
    "torch.cuda.get_rng_state": "seeding",
    "torch.cuda.set_rng_state": "seeding",
    "numpy.random": "seeding",
    # strings evaluated as code
    "typing.get_type_hints": "banned_builtin",
    "typing.ForwardRef": "banned_builtin",
    "functools.singledispatch": "banned_builtin",
    "functools.singledispatchmethod": "banned_builtin",
    # tensor subclasses
    "torch.Tensor.as_subclass": "tensor_subclass",
}

# Namespaces where only the listed children may be used.
NAMESPACE_ALLOW: dict[str, tuple[frozenset, str]] = {
    "torch.utils": (frozenset({"cpp_extension"}), "torch_utils"),
    "torch.utils.cpp_extension": (frozenset({"load_inline"}), "cpp_extension_other"),
    "triton": (frozenset({"jit", "autotune", "heuristics", "Config", "cdiv",
                          "next_power_of_2", "language"}), "triton_api"),
}

# Attribute names refused wherever they appear (whatever the object is),
# because aliasing could hide the module they come from.
LEAF_DENY: dict[str, str] = {
    "Stream": "streams_events_graphs",
    "ExternalStream": "streams_events_graphs",
    "StreamContext": "streams_events_graphs",
    "Event": "streams_events_graphs",
    "CUDAGraph": "streams_events_graphs",
    "make_graphed_callables": "streams_events_graphs",
    "graph_pool_handle": "streams_events_graphs",
    "current_stream": "streams_events_graphs",
    "default_stream": "streams_events_graphs",
    "set_stream": "streams_events_graphs",
    "record_event": "streams_events_graphs",
    "wait_event": "streams_events_graphs",
    "wait_stream": "streams_events_graphs",
    "record_stream": "streams_events_graphs",
    "manual_seed": "seeding",
    "manual_seed_all": "seeding",
    "seed": "seeding",
    "seed_all": "seeding",
    "initial_seed": "seeding",
    "set_rng_state": "seeding",
    "get_rng_state": "seeding",
    "fork_rng": "seeding",
    "Generator": "seeding",
    "default_generator": "seeding",
    "RandomState": "seeding",
    "default_rng": "seeding",
    "from_file": "file_os_network",
    "tofile": "file_os_network",
    "fromfile": "file_os_network",
    "dump": "file_os_network",
    "dumps": "file_os_network",
    "share_memory_": "file_os_network",
    "memmap": "file_os_network",
    "DataSource": "file_os_network",
    "load_library": "custom_op_registration",
    "custom_op": "custom_op_registration",
    "py_impl": "custom_op_registration",
    "py_kernels": "custom_op_registration",
    "register_kernel": "custom_op_registration",
    "register_fake": "custom_op_registration",
    "register_autograd": "custom_op_registration",
    "impl_abstract": "custom_op_registration",
    "compile": "compile_jit",
    "profiler": "profiler",
    "as_subclass": "tensor_subclass",
    "attrgetter": "dynamic_getattr",
    "methodcaller": "dynamic_getattr",
    "set_num_threads": "threads_processes",
    "set_num_interop_threads": "threads_processes",
    "inline_asm_elementwise": "triton_api",
    "get_type_hints": "banned_builtin",
    "CUDAPluggableAllocator": "custom_op_registration",
    "change_current_allocator": "custom_op_registration",
    "singledispatch": "banned_builtin",
    "singledispatchmethod": "banned_builtin",
}

# Low-precision dtypes and casts (only under tolerance "strict").
PRECISION_LEAVES = frozenset({
    "half", "float16", "bfloat16", "HalfTensor", "BFloat16Tensor",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "int8", "qint8", "quint8", "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8",
    "fp8e5b16", "autocast", "amp", "set_float32_matmul_precision",
    "set_default_dtype", "set_default_tensor_type", "set_flush_denormal", "quantize_per_tensor",
    "quantize_per_channel",
})

# Triton calls whose argument is a @triton.jit combine function, which
# Triton's compiler traces inside the kernel (it never runs as Python).
TRITON_COMBINE_CALLS = frozenset({"triton.language.associative_scan", "triton.language.reduce"})

# Decorators allowed (resolved qualified names; functools.* is allowed too).
ALLOWED_DECORATORS = frozenset({
    "triton.jit", "triton.autotune", "triton.heuristics", "staticmethod",
    "torch.no_grad", "torch.inference_mode",
})

# Allowed base classes (resolved), besides `object` and classes of the module.
ALLOWED_BASES = frozenset({
    "torch.nn.Module", "torch.autograd.Function", "enum.Enum", "enum.IntEnum",
    "typing.NamedTuple",
})
TENSOR_BASE_LEAVES = frozenset({
    "Tensor", "Parameter", "UninitializedParameter", "UninitializedBuffer",
    "TensorBase", "_TensorBase",
})

MUTATING_METHODS = frozenset({
    "update", "clear", "setdefault", "popitem", "append", "extend", "insert",
    "discard",
})

LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
LOAD_INLINE_PARAMS = (
    "name", "cpp_sources", "cuda_sources", "functions", "extra_cflags",
    "extra_cuda_cflags", "extra_ldflags", "extra_include_paths",
    "build_directory", "verbose", "with_cuda", "is_python_module",
    "with_pytorch_error_handling", "keep_intermediates",
)
LOAD_INLINE_ALLOWED = frozenset({
    "name", "cpp_sources", "cuda_sources", "functions", "extra_cflags",
    "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "verbose",
    "with_cuda",
})

# ---------------------------------------------------------------------------
# The rule table
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rule:
    """One static rule. `message` says what is refused, `threat` the escape
    or measurement hack it stops (and, for rules that match narrowly, which
    other guard covers the rest), `fix` how a correct candidate complies."""
    id: str
    message: str
    stage: str  # python | load_inline | flags | native | symbols
    check: Callable[["Context"], Iterable[tuple[int, str]]] | None = None
    threat: str = ""
    fix: str = ""


@dataclasses.dataclass
class Finding:
    rule: str
    line: int
    detail: str = ""


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
        for n in ctx.nodes:
            ann = []
            if isinstance(n, ast.arg) and n.annotation is not None:
                ann.append(n.annotation)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
                ann.append(n.returns)
            elif isinstance(n, ast.AnnAssign):
                ann.append(n.annotation)
            for a in ann:
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
    annots = []
    for n in ctx.nodes:
        if isinstance(n, ast.arg) and n.annotation is not None:
            annots.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            annots.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            annots.append(n.annotation)
    for a in annots:
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


# ---------------------------------------------------------------------------
# Static resolution of load_inline arguments
# ---------------------------------------------------------------------------

class Unresolved(Exception):
    pass


_SCALARS = (str, int, float, bool, type(None))


class _Resolver:
    def __init__(self, ctx: Context, call: ast.Call):
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


def _resolve_load_inline_call(ctx: Context, call: ast.Call):
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


# ---------------------------------------------------------------------------
# Native (C++/CUDA) sources
# ---------------------------------------------------------------------------

# #include reads a file at compile time (its text can surface in the compile
# log, so a path names what to leak) and system headers declare the OS. Only
# headers by name from: torch/ATen/c10, the CUDA toolkit (runtime and driver
# API headers, cuBLAS, cuRAND, CUB, libcu++, math constants, fp16/bf16,
# WMMA, cooperative groups), and the C/C++ standard library minus files,
# threads, clocks and signals. What the code then calls is checked by the
# identifier rules below and, after compiling, by the symbol allowlist.
NATIVE_INCLUDES = frozenset({
    # torch
    "torch/extension.h", "torch/torch.h", "torch/types.h", "torch/all.h",
    # CUDA toolkit
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_fp16.h", "cuda_fp16.hpp",
    "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp", "cublas_v2.h", "cublas.h",
    "cublas_api.h", "cublasLt.h", "curand.h", "curand_kernel.h", "curand_philox4x32_x.h",
    "curand_normal.h", "curand_uniform.h", "math_constants.h", "device_functions.h",
    "device_launch_parameters.h", "vector_types.h", "vector_functions.h", "mma.h",
    "cooperative_groups.h", "cuda_pipeline.h", "cuda_pipeline_primitives.h",
    "cuda_awbarrier.h", "sm_20_intrinsics.h", "sm_30_intrinsics.h", "sm_32_intrinsics.h",
    "sm_35_intrinsics.h", "sm_60_atomic_functions.h", "sm_61_intrinsics.h",
    "cuda_texture_types.h", "texture_fetch_functions.h", "builtin_types.h", "driver_types.h",
    "host_defines.h", "cuComplex.h", "library_types.h",
    # C standard library
    "math.h", "stdint.h", "limits.h", "float.h", "assert.h", "stddef.h", "stdio.h",
    "stdlib.h", "string.h", "stdbool.h", "stdarg.h", "inttypes.h", "ctype.h", "errno.h",
    # C++ standard library
    "cmath", "cstdint", "climits", "cfloat", "cassert", "cstddef", "cstdio", "cstdlib",
    "cstring", "cstdarg", "cinttypes", "cctype", "cerrno", "iostream", "ostream", "istream",
    "sstream", "iomanip", "ios", "iosfwd", "string", "string_view", "vector", "array",
    "tuple", "utility", "algorithm", "numeric", "functional", "memory", "limits",
    "type_traits", "initializer_list", "optional", "variant", "map", "unordered_map", "set",
    "unordered_set", "list", "deque", "queue", "stack", "bitset", "iterator", "stdexcept",
    "exception", "new", "complex", "ratio", "cstdbool", "typeinfo", "random",
})
NATIVE_INCLUDE_PREFIXES = ("ATen/", "c10/", "cuda/std/", "cub/block/", "cub/warp/", "cub/thread/",
                           "cub/iterator/", "cooperative_groups/")
NATIVE_INCLUDES = NATIVE_INCLUDES | frozenset({
    "cub/util_type.cuh", "cub/util_ptx.cuh", "cub/util_macro.cuh", "cub/config.cuh",
    "cuda/barrier", "cuda/pipeline", "cuda/atomic", "cuda/annotated_ptr", "cuda/functional",
    "cuda/cmath", "cuda/type_traits",
})
# Headers that look like the toolkit's but make the library import what the
# symbol allowlist refuses: CUB's device-wide algorithms (and cub/cub.cuh,
# which includes them) load the driver API with dlopen/dlsym and read the
# environment (seen with CUDA 13 on the H200 machine). Refused here with a
# hint, rather than later as an opaque native_symbol violation.
NATIVE_INCLUDE_HINTS = {
    "cub/cub.cuh": "include the block- or warp-level header you use (cub/block/block_reduce.cuh, cub/block/block_scan.cuh)",
    "cub/device/": "CUB device-wide algorithms load the driver API (dlopen/dlsym); use cub/block/ or cub/warp/ primitives",
}

N_STREAM_PREFIXES = ("cudaStream", "cudaEvent", "cudaGraph", "cuStream", "cuEvent", "cuGraph")
N_STREAM_NAMES = frozenset({
    "getStreamFromPool", "getStreamFromExternal", "CUDAStream", "CUDAStreamGuard",
    "OptionalCUDAStreamGuard", "CUDAMultiStreamGuard", "setCurrentCUDAStream",
    "getDefaultCUDAStream", "CUDAEvent", "CUDAGraph", "cudaLaunchHostFunc",
})
N_STREAM_ALLOWED = frozenset({"cudaStream_t"})
N_SYSCALL = frozenset({
    "syscall", "fork", "vfork", "clone", "clone3", "exec", "execl", "execlp",
    "execle", "execv", "execve", "execvp", "execvpe", "fexecve", "system",
    "popen", "pclose", "dlopen", "dlsym", "dlvsym", "dlclose", "dlmopen",
    "dlerror", "dladdr", "dlinfo", "dl_iterate_phdr", "mmap", "mmap64",
    "munmap", "mprotect", "mremap", "ptrace", "kill", "tgkill", "signal",
    "sigaction", "socket", "socketpair", "connect", "bind", "listen",
    "accept", "accept4", "send", "sendto", "sendmsg", "recv", "recvfrom",
    "recvmsg", "getaddrinfo", "gethostbyname", "ioctl", "prctl", "seccomp",
    "setuid", "setgid", "seteuid", "chroot", "unshare", "setns", "pipe",
    "pipe2", "dup", "dup2", "dup3", "read", "write", "pread", "pwrite",
    "readv", "writev", "close", "posix_spawn", "posix_spawnp", "atexit", "at_quick_exit",
    "process_vm_readv", "process_vm_writev", "memfd_create", "personality",
    "mount", "pivot_root", "getauxval",
})
N_SYSCALL_PREFIXES = ("SYS_", "__NR_", "__libc_", "__syscall", "RTLD_")
# Opening, naming or reading files. Writing to the streams the process
# already has (printf, std::cout, fprintf(stderr, ...)) is allowed, like
# Python's print: with no way to open a FILE*, stdout and stderr are the only
# ones there are.
N_FILE = frozenset({
    "fopen", "fopen64", "freopen", "freopen64", "fdopen", "fmemopen", "open_memstream",
    "open", "open64", "openat",
    "openat2", "creat", "ifstream", "ofstream", "fstream", "basic_ifstream",
    "basic_ofstream", "basic_fstream", "filebuf", "basic_filebuf",
    "filesystem", "remove", "rename", "renameat", "unlink", "unlinkat",
    "rmdir", "mkdir", "mkdirat", "chmod", "fchmod", "chown", "truncate",
    "ftruncate", "fread", "fgets", "fgetc",
    "fscanf", "fclose", "fseek", "ftell",
    "rewind", "opendir", "readdir", "closedir", "scandir", "stat", "lstat",
    "fstat", "statx", "access", "faccessat", "realpath", "symlink", "link",
    "readlink", "tmpfile", "tmpnam", "mkstemp", "mkdtemp", "stdin", "from_file",
    "cin", "wcin",
})
N_GETENV = frozenset({
    "getenv", "secure_getenv", "environ", "__environ", "_environ", "setenv",
    "putenv", "unsetenv", "clearenv", "get_env", "check_env",
})
N_ASM = frozenset({"asm", "__asm__", "__asm", "_asm"})
N_THREAD = frozenset({"jthread", "omp_get_thread_num", "omp_set_num_threads"})
N_THREAD_PREFIXES = ("pthread_", "omp_")
N_CUSTOM_OP = frozenset({
    "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT",
    "RegisterOperators", "Dispatcher", "Library", "constructor", "destructor",
    "ifunc", "init_priority", "SetAllocator", "SetCPUAllocator",
    "set_num_threads", "set_num_interop_threads", "globalContext",
})
N_CUSTOM_OP_PREFIXES = ("TORCH_LIBRARY",)
N_DRIVER = frozenset({"getNVRTC", "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion"})
N_DRIVER_PREFIXES = ("cudaIpc", "nvrtc", "cudaGetDriverEntryPoint", "cudaLibrary")
N_PRECISION = frozenset({
    "half", "__half", "__half2", "half2", "Half", "BFloat16", "__nv_bfloat16",
    "__nv_bfloat162", "nv_bfloat16", "kHalf", "kFloat16", "kBFloat16", "tf32",
    "__float_to_tf32", "CUBLAS_TF32_TENSOR_OP_MATH", "cublasSetMathMode",
})
N_PRECISION_PREFIXES = ("__float2half", "__float2bfloat16", "__floats2half", "__float22half",
                        "__nv_fp8", "CUBLAS_COMPUTE_32F_FAST")
N_PREPROC_NAMES = frozenset({"_Pragma", "__pragma", "__has_include", "__has_include_next",
                             "__has_embed"})
N_DIRECTIVES = frozenset({"include", "define", "undef", "if", "ifdef", "ifndef", "elif",
                          "else", "endif", "pragma", "error", "warning", "line", ""})


def _native_identifier_hits(tok: str, prev: str | None, nxt: str | None, strict: bool,
                            prev2: str | None = None):
    """(rule, detail) for one identifier token. prev/nxt are neighbouring tokens."""
    member = prev in (".", "->")
    if tok not in N_STREAM_ALLOWED and (tok.startswith(N_STREAM_PREFIXES) or tok in N_STREAM_NAMES):
        yield "native_stream_event_graph", f"`{tok}`"
    if (re.match(r"Py[A-Z_]", tok) or tok.startswith(("_Py", "THP", "PYBIND11")) or tok == "pybind11"
            or (tok == "py" and nxt == "::")):
        yield "native_python_api", f"`{tok}`"
    if not member and (tok in N_SYSCALL or tok.startswith(N_SYSCALL_PREFIXES)):
        yield "native_syscall", f"`{tok}`"
    if not member and tok in N_FILE:
        yield "native_file_io", f"`{tok}`"
    if tok in N_GETENV:
        yield "native_getenv", f"`{tok}`"
    if tok in N_ASM:
        yield "native_asm", f"`{tok}`"
    if (tok in N_THREAD or tok.startswith(N_THREAD_PREFIXES)
            or (tok in ("thread", "async", "this_thread") and prev == "::" and prev2 == "std")
            or (tok == "launch" and prev == "::" and prev2 == "at")):
        yield "native_thread", f"`{tok}`"
    if tok in N_CUSTOM_OP or tok.startswith(N_CUSTOM_OP_PREFIXES):
        yield "native_custom_op", f"`{tok}`"
    if tok in N_DRIVER or tok.startswith(N_DRIVER_PREFIXES) or re.match(r"cu[A-Z]", tok):
        yield "native_driver_api", f"`{tok}`"
    if strict and (tok in N_PRECISION or tok.startswith(N_PRECISION_PREFIXES)):
        yield "native_precision", f"`{tok}` under tolerance 'strict'"
    if tok in N_PREPROC_NAMES:
        yield "native_preprocessor", f"`{tok}`"


def _splice(text: str) -> list[tuple[str, int]]:
    """Translation phase 2: drop backslash-newline (GCC also drops trailing
    blanks between them). Returns (char, line) pairs."""
    out = []
    line = 1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] in "\r\n":
                if text[j] == "\r" and j + 1 < n and text[j + 1] == "\n":
                    j += 1
                line += 1
                i = j + 1
                continue
        out.append((c, line))
        if c == "\n":
            line += 1
        i += 1
    return out


class NativeLex:
    """A C/C++ lexer good enough for rule checks: comments and literals are
    dropped, identifiers and punctuators kept, directives recognised."""

    def __init__(self, text: str):
        self.tokens: list[tuple[str, str, int]] = []      # (kind, text, line)
        self.directives: list[tuple[str, str, int]] = []  # (name, rest, line)
        self.issues: list[tuple[str, int, str]] = []      # (rule, line, detail)
        self._lex(text)

    def _lex(self, text):
        for m in re.finditer(r"\?\?[=/'()!<>\-]", text):
            self.issues.append(("native_macro", text.count("\n", 0, m.start()) + 1, f"trigraph {m.group(0)!r}"))
        chars = _splice(text)
        s = "".join(c for c, _ in chars)
        lines = [ln for _, ln in chars]
        n = len(s)
        i = 0
        at_line_start = True
        directive: list | None = None  # [name, start_index, line]

        def line_at(k):
            return lines[k] if k < n else (lines[-1] if lines else 1)

        def finish_directive(end):
            nonlocal directive
            if directive is not None:
                name, start, ln = directive
                self.directives.append((name, s[start:end].strip(), ln))
                directive = None

        while i < n:
            c = s[i]
            if c == "\n":
                finish_directive(i)
                at_line_start = True
                i += 1
                continue
            if c in " \t\r\f\v":
                i += 1
                continue
            if s.startswith("//", i):
                j = s.find("\n", i)
                i = n if j < 0 else j
                continue
            if s.startswith("/*", i):
                j = s.find("*/", i + 2)
                if j < 0:
                    self.issues.append(("native_macro", line_at(i), "unterminated comment"))
                    i = n
                else:
                    # A comment inside a directive is one space; the directive continues.
                    i = j + 2
                continue
            ln = line_at(i)
            if at_line_start and (c == "#" or s.startswith("%:", i)):
                at_line_start = False
                i += 1 if c == "#" else 2
                while i < n and s[i] in " \t":
                    i += 1
                m = re.match(r"[A-Za-z_]\w*", s[i:])
                name = m.group(0) if m else ""
                i += len(name)
                directive = [name, i, ln]
                if name in ("include", "include_next", "import", "embed"):
                    j = s.find("\n", i)
                    j = n if j < 0 else j
                    rest = s[i:j]
                    rest = re.sub(r"/\*.*?\*/", " ", rest)
                    rest = rest.split("//")[0]
                    self.directives.append((name, rest.strip(), ln))
                    directive = None
                    i = j
                continue
            at_line_start = False
            m = re.match(r"(u8|u|U|L)?R\"([^ ()\\\t\n]{0,16})\(", s[i:])
            if m:
                end = s.find(")" + m.group(2) + '"', i + m.end())
                if end < 0:
                    self.issues.append(("native_macro", ln, "unterminated raw string"))
                    i = n
                else:
                    i = end + len(m.group(2)) + 2
                self.tokens.append(("lit", '""', ln))
                continue
            m = re.match(r"(u8|u|U|L)?([\"'])", s[i:])
            if m:
                q = m.group(2)
                j = i + m.end()
                while j < n and s[j] != q and s[j] != "\n":
                    j += 2 if s[j] == "\\" else 1
                if j >= n or s[j] != q:
                    self.issues.append(("native_macro", ln, "unterminated literal"))
                i = j + 1
                self.tokens.append(("lit", q + q, ln))
                continue
            m = re.match(r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*", s[i:])
            if m:
                i += m.end()
                self.tokens.append(("num", m.group(0), ln))
                continue
            m = re.match(r"[A-Za-z_$][A-Za-z0-9_$]*", s[i:])
            if m:
                i += m.end()
                self.tokens.append(("id", m.group(0), ln))
                continue
            if not c.isascii():
                self.issues.append(("native_macro", ln, "non-ASCII character outside literals and comments"))
                i += 1
                continue
            if c == "\\":
                self.issues.append(("native_macro", ln, "backslash outside literals (universal character name)"))
                i += 1
                continue
            for p in ("%:%:", "##", "%:", "::", "->", "<<", ">>"):
                if s.startswith(p, i):
                    self.tokens.append(("punct", p, ln))
                    i += len(p)
                    break
            else:
                self.tokens.append(("punct", c, ln))
                i += 1
        finish_directive(n)


def check_native_source(text: str, *, kind: str = "cpp_sources", strict: bool = True) -> list[Finding]:
    """Findings for one C++/CUDA source (line = native line)."""
    lex = NativeLex(text)
    out = [Finding(r, ln, d) for r, ln, d in lex.issues]
    toks = lex.tokens
    for idx, (k, t, ln) in enumerate(toks):
        if k == "punct":
            if t in ("##", "%:%:"):
                out.append(Finding("native_macro", ln, "token pasting `##`"))
            elif t == "%:":
                out.append(Finding("native_macro", ln, "digraph `%:`"))
            continue
        if k != "id":
            continue
        prev = toks[idx - 1][1] if idx > 0 else None
        prev2 = toks[idx - 2][1] if idx > 1 else None
        nxt = toks[idx + 1][1] if idx + 1 < len(toks) else None
        for rule, detail in _native_identifier_hits(t, prev, nxt, strict, prev2):
            out.append(Finding(rule, ln, detail))
    for name, rest, ln in lex.directives:
        if name == "include":
            m = re.fullmatch(r"<([^<>\"]+)>|\"([^<>\"]+)\"", rest)
            header = (m.group(1) or m.group(2)) if m else None
            if header is None:
                out.append(Finding("native_include", ln, f"#include {rest} (computed include)"))
            elif (".." in header or header.startswith("/") or "\\" in header
                  or not (header in NATIVE_INCLUDES or header.startswith(NATIVE_INCLUDE_PREFIXES))):
                hint = next((h for k, h in NATIVE_INCLUDE_HINTS.items() if header.startswith(k)), None)
                out.append(Finding("native_include", ln, f"#include <{header}>" + (f" ({hint})" if hint else "")))
        elif name == "pragma":
            word = rest.split()[0] if rest.split() else ""
            if word == "omp":
                out.append(Finding("native_thread", ln, "#pragma omp"))
            elif word not in ("once", "unroll"):
                out.append(Finding("native_preprocessor", ln, f"#pragma {rest}"))
        elif name not in N_DIRECTIVES:
            out.append(Finding("native_preprocessor", ln, f"#{name}"))
    return out


def _check_native(rule_id):
    def check(ctx):
        for u in ctx.native_units:
            for f in check_native_source(u["text"], kind=u["kind"], strict=ctx.strict):
                if f.rule == rule_id:
                    yield u["line"], f"{u['where']} line {f.line}: {f.detail}"
    return check


# ---------------------------------------------------------------------------
# Undefined-symbol allowlist (second line of defence after compiling)
# ---------------------------------------------------------------------------

_MATH_BASE = (
    "exp exp2 exp10 expm1 log log2 log10 log1p logb sqrt cbrt pow sin cos tan asin acos atan "
    "atan2 sinh cosh tanh asinh acosh atanh erf erfc erfinv tgamma lgamma fabs floor ceil round "
    "trunc rint nearbyint lround llround lrint llrint fmod remainder remquo fmax fmin fma fdim "
    "hypot ldexp frexp modf copysign nextafter sincos scalbn scalbln ilogb nan"
).split()
C_ALLOWED = frozenset(
    [f"{b}{s}" for b in _MATH_BASE for s in ("", "f", "l")]
    + [f"__{b}{s}_finite" for b in _MATH_BASE for s in ("", "f", "l")]
    + """memcpy memmove memset memcmp memchr strlen strnlen strcmp strncmp strchr strrchr strstr
    strdup strndup __memcpy_chk __memmove_chk __memset_chk __stack_chk_fail __assert_fail abort
    __gxx_personality_v0 __gmon_start__ _ITM_deregisterTMCloneTable _ITM_registerTMCloneTable
    __tls_get_addr __errno_location __libc_single_threaded __dynamic_cast _GLOBAL_OFFSET_TABLE_
    __dso_handle atexit exit _exit _Exit quick_exit
    malloc free calloc realloc posix_memalign aligned_alloc memalign
    snprintf vsnprintf sprintf vsprintf __snprintf_chk __vsnprintf_chk __sprintf_chk __vsprintf_chk
    strtol strtoul strtoll strtoull strtod strtof strtold abs labs llabs div ldiv
    __isnan __isnanf __isinf __isinff __finite __finitef __signbit __signbitf __fpclassify
    __ctype_b_loc __ctype_tolower_loc __ctype_toupper_loc tolower toupper qsort bsearch
    pthread_mutex_lock pthread_mutex_unlock pthread_once __pthread_key_create
    cudaGetLastError cudaPeekAtLastError cudaGetErrorString cudaGetErrorName cudaLaunchKernel
    cudaLaunchKernelExC cudaLaunchCooperativeKernel __cudaRegisterFatBinary
    __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction __cudaRegisterVar
    __cudaRegisterManagedVar __cudaInitModule __cudaPushCallConfiguration
    __cudaPopCallConfiguration cudaMalloc cudaFree cudaMallocAsync cudaFreeAsync cudaMemcpy
    cudaMemcpyAsync cudaMemset cudaMemsetAsync cudaMemcpyToSymbol cudaMemcpyToSymbolAsync
    cudaMemcpyFromSymbol cudaMemcpyFromSymbolAsync cudaGetSymbolAddress cudaDeviceSynchronize
    cudaGetDevice cudaGetDeviceCount cudaGetDeviceProperties cudaGetDeviceProperties_v2
    cudaDeviceGetAttribute cudaFuncSetAttribute cudaFuncGetAttributes cudaFuncSetCacheConfig
    cudaFuncSetSharedMemConfig cudaOccupancyMaxActiveBlocksPerMultiprocessor
    cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags cudaMemGetInfo cudaRuntimeGetVersion
    cudaDriverGetVersion cudaPointerGetAttributes
    printf vprintf puts putchar putc _IO_putc fputs fputc fprintf vfprintf fwrite fflush
    __printf_chk __vprintf_chk __fprintf_chk __vfprintf_chk stdout stderr""".split())
# pybind11's argument and return casters for plain values (std::vector,
# std::tuple, IntArrayRef, double, int64_t, bool, lists): they read or build
# numbers and sequences that the candidate's own Python passed. The glue
# probe (Tensor arguments only) does not import them; a published conv2d
# taking std::tuple<int, int> stride did (PySequence_GetItem, stop 32). The
# ones a tuple/vector/ArrayRef/double/bool/int64 signature imports beyond the
# probe, measured with torch 2.11 on this machine (docs/rules.md), and their
# siblings for other widths and for return values. Still refused: anything
# that runs, imports or evaluates Python (PyRun_*, PyImport_*, PyEval_*
# beyond the glue's own, Py_CompileString, PyObject_Call* beyond the glue's).
PYBIND_CASTERS = frozenset("""PySequence_Check PySequence_Size PySequence_GetItem PySequence_Length
    PyIndex_Check PyNumber_Check PyNumber_Long PyNumber_Float PyNumber_Index
    PyLong_AsLong PyLong_AsLongLong PyLong_AsUnsignedLong PyLong_AsUnsignedLongLong PyLong_AsSsize_t
    PyLong_AsDouble PyLong_FromLong PyLong_FromLongLong PyLong_FromSsize_t PyLong_FromUnsignedLong
    PyLong_FromUnsignedLongLong PyLong_Type PyFloat_AsDouble PyFloat_FromDouble PyFloat_Type
    PyBool_Type PyBool_FromLong PyList_New PyList_Size PyList_GetItem PyList_SetItem PyList_Append
    PyList_Type PyTuple_Type""".split())
C_ALLOWED_PREFIXES = ("__cxa_", "_Unwind_", "__cuda", "__isoc23_strto", "__isoc99_sscanf", "__isoc23_sscanf")

# cuBLAS / cuBLASLt compute calls (libtorch_cuda already loads the
# libraries; `-lcublas` may name them too). Not the calls that move work to
# another stream or write log files.
CUBLAS_PREFIXES = ("cublas", "cublasLt")
CUBLAS_DENY_PREFIXES = ("cublasSetStream", "cublasSetKernelStream", "cublasLogger",
                        "cublasSetLoggerCallback", "cublasGetLoggerCallback", "cublasLtLogger")

TORCH_NAMESPACES = frozenset({"c10", "at", "torch", "caffe2"})
TORCH_SYMBOL_DENY = frozenset({
    "Library", "Dispatcher", "RegisterOperators", "jit", "serialize", "get_env", "check_env",
    "ThreadPool", "TaskThreadPool", "PTThreadPool", "launch", "intraop_launch",
    "set_num_threads", "set_num_interop_threads", "SetAllocator", "SetCPUAllocator",
    "getStreamFromPool", "getStreamFromExternal", "setCurrentCUDAStream", "CUDAGraph",
    "from_file", "python", "manual_seed", "getNVRTC", "pickle_save", "pickle_load",
    "load", "save",
})
STD_ALLOWED = frozenset({
    "basic_string", "char_traits", "allocator", "basic_ostringstream", "basic_istringstream",
    "basic_stringstream", "basic_stringbuf", "basic_ostream", "ostream", "basic_istream",
    "istream", "iostream", "basic_ios", "ios_base", "locale", "ctype", "terminate", "exception",
    "runtime_error", "logic_error", "invalid_argument", "out_of_range", "length_error",
    "domain_error", "overflow_error", "underflow_error", "range_error", "bad_alloc",
    "bad_array_new_length", "bad_cast", "bad_typeid", "bad_function_call",
    "bad_optional_access", "bad_variant_access", "bad_weak_ptr", "__detail", "_Hash_bytes",
    "_Fnv_hash_bytes", "_Rb_tree_increment", "_Rb_tree_decrement",
    "_Rb_tree_insert_and_rebalance", "_Rb_tree_rebalance_for_erase", "__ostream_insert", "_V2",
    "error_category", "system_error", "nothrow", "type_info", "__exception_ptr",
    "rethrow_exception", "current_exception", "uncaught_exception", "uncaught_exceptions",
    "__glibcxx_assert_fail", "nested_exception", "align_val_t", "_Sp_make_shared_tag",
    "__once_callable", "__once_call", "condition_variable", "mutex", "__throw_",
    "operator", "string", "_Sp_counted_base", "__shared_count", "__weak_count",
    "ios_base_library_init", "__throw_bad_alloc", "basic_streambuf",
    # the process's own output streams, like Python's print
    "cout", "cerr", "clog", "wcout", "wcerr", "endl", "ends", "flush",
})
STD_DENY = frozenset({
    "basic_ifstream", "basic_ofstream", "basic_fstream", "basic_filebuf", "__basic_file",
    "filesystem", "thread", "jthread", "this_thread", "__future_base", "future", "async",
    "random_device", "cin", "wcin",
})

_STD_SUBST = {"St": ["std"], "Sa": ["std", "allocator"], "Sb": ["std", "basic_string"],
              "Ss": ["std", "string"], "Si": ["std", "istream"], "So": ["std", "ostream"],
              "Sd": ["std", "iostream"]}


def _mangled_components(sym: str, i: int) -> list[str] | None:
    """Leading qualified-name components of an Itanium name starting at sym[i]
    (after `_Z`, `_ZTV` ...). Stops at template arguments or parameters."""
    comps: list[str] = []
    nested = False
    if sym.startswith("N", i):
        nested = True
        i += 1
        while i < len(sym) and sym[i] in "rVKRO":
            i += 1
    while i < len(sym):
        two = sym[i:i + 2]
        if two in _STD_SUBST:
            comps += _STD_SUBST[two]
            i += 2
        elif sym[i].isdigit():
            m = re.match(r"\d+", sym[i:])
            ln = int(m.group(0))
            i += len(m.group(0))
            comps.append(sym[i:i + ln])
            i += ln
        elif re.match(r"[a-z][a-z]", two) and two not in ("St",):
            comps.append("operator")
            break
        elif two in ("C1", "C2", "C3", "D0", "D1", "D2"):
            break
        else:
            break
        if not nested:
            if comps and comps[0] == "std" and len(comps) == 1:
                continue  # _ZSt<len>name: one more component
            break
    return comps


def _symbol_ok(sym: str) -> tuple[bool, str]:
    if not sym.startswith("_Z"):
        if sym in C_ALLOWED or sym in PYBIND_CASTERS or sym.startswith(C_ALLOWED_PREFIXES):
            return True, ""
        if sym.startswith(CUBLAS_PREFIXES):
            if sym.startswith(CUBLAS_DENY_PREFIXES):
                return False, "cuBLAS stream or logger call"
            return True, ""
        return False, "not on the allowlist"
    if sym.startswith(("_Znw", "_Zna", "_Zdl", "_Zda")):
        return True, ""
    i = 2
    special = False
    for p in ("TV", "TI", "TS", "TT"):
        if sym.startswith(p, 2):
            i = 4
            special = True
            break
    if special and re.fullmatch(r"[PKRVv]*[a-z]", sym[i:]):
        return True, ""  # typeinfo of builtin types: _ZTIi, _ZTIPKc
    comps = _mangled_components(sym, i)
    if not comps:
        return False, "unrecognised mangled name"
    head = comps[0]
    if head == "__cxxabiv1":
        return True, ""
    if sym.startswith("_ZN8pybind116detail11type_casterIN3c108ArrayRefI"):
        # torch_python's IntArrayRef caster, from an IntArrayRef argument in a
        # bound signature; the Tensor caster stays refused (the glue does not
        # need it: native code that converts Python objects itself does).
        return True, ""
    if head in TORCH_NAMESPACES:
        for k, c in enumerate(comps):
            if c in TORCH_SYMBOL_DENY or (k and comps[k - 1] == "Context" and c.startswith("set")):
                return False, f"{'::'.join(comps)} is denied"
        return True, ""
    if head == "std":
        rest = [c for c in comps[1:] if c not in ("__cxx11", "__1")]
        if any(c in STD_DENY for c in rest):
            return False, f"{'::'.join(comps)} is denied"
        if not rest:
            return False, "unrecognised std name"
        first = rest[0]
        if first in STD_ALLOWED or first.startswith("__throw_"):
            return True, ""
        return False, f"std::{first} is not on the allowlist"
    return False, f"{'::'.join(comps)} is not on the allowlist"


def _read_symbol_policy() -> str:
    import hashlib

    h = hashlib.sha256()
    for path in (__file__, _elf.__file__):  # the allowlists, and what reads the symbols
        with open(path, "rb") as f:
            h.update(f.read())
    return "rules-%s-%s" % (RULES_VERSION, h.hexdigest()[:16])


# Read once, when the module is imported (the worker's zygote imports it
# before it forks any job).
_SYMBOL_POLICY = _read_symbol_policy()


def symbol_policy() -> str:
    """A digest of everything that decides a symbol verdict: this module's
    own text (the allowlists and the code that reads them). A compile cache
    entry records the policy its verdict was made under; an entry made under
    another is checked again from its objects (no recompile)."""
    return _SYMBOL_POLICY


def check_symbols(undefined_symbols: list[str], allow_extra: Iterable[str] = ()) -> list[dict]:
    """Violations for a built library's undefined dynamic symbols.

    `undefined_symbols`: names as `nm -D --undefined-only` or
    `undefined_symbols()` give them (a `@VERSION` suffix is ignored).
    `allow_extra`: exact names pulled in by korch's own binding glue
    (pybind11 / libpython / torch_python), allowed in addition."""
    extra = {s.split("@")[0] for s in allow_extra}
    out = []
    for raw in undefined_symbols:
        sym = raw.split("@")[0].strip()
        if not sym or sym in extra:
            continue
        ok, why = _symbol_ok(sym)
        if not ok:
            out.append(violation("native_symbol", 0, f"{sym} ({why})"))
    return out


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

# Each row: Rule(id, message, stage, check, threat=..., fix=...). `message`
# is what the system prompt lists; `threat` names the escape or measurement
# hack; `fix` is what a violation tells the author to do.
RULES: list[Rule] = [
    Rule("syntax_error", "the module must be valid Python", "python",
         threat="nothing can be checked in a module that does not parse",
         fix="make the module parse with Python 3.11+ (`python3 -m py_compile FILE`)"),
    Rule("source_encoding", "the module must be UTF-8 (no other coding declaration)", "python", _check_source_encoding,
         threat="a coding cookie such as utf-7 makes the interpreter read different code than the rules did",
         fix="save the file as UTF-8 and drop the coding declaration"),
    Rule("non_ascii_identifier", "identifiers must be ASCII (Python NFKC-folds look-alikes such as `ｅｖａｌ`)", "python", _check_non_ascii_identifier,
         threat="look-alike letters that Python folds into banned names (`ｅｖａｌ` is `eval`)",
         fix="spell identifiers in ASCII; non-ASCII text belongs in strings and comments"),
    Rule("import_not_allowed", "only torch, torch.nn, torch.nn.functional, torch.utils.cpp_extension, triton, triton.language, math, numpy, typing, functools, itertools, operator, collections, dataclasses and enum may be imported", "python", _check_imports,
         threat="modules that reach the OS, files, processes, the network or the interpreter",
         fix="import only the listed modules (write kernels with torch.utils.cpp_extension.load_inline or triton)"),
    Rule("star_import", "`from x import *` is not allowed", "python", _check_star_import,
         threat="names that the rules cannot see being bound",
         fix="import the names you use explicitly (`from math import sqrt`)"),
    Rule("try_except", "no try/except/finally (errors must surface)", "python", _check_try,
         threat="a fallback that hides a failing kernel behind the reference implementation",
         fix="remove the try block and let errors raise; check preconditions with `if` instead"),
    Rule("global_statement", "no global or nonlocal statements", "python", _check_global,
         threat="state that changes between calls (caching results across timed calls)",
         fix="keep state on `self` in ModelNew, or pass it explicitly"),
    Rule("match_statement", "no match statements", "python", _check_match,
         threat="capture patterns that bind names the rules do not track",
         fix="use if/elif instead of match"),
    Rule("banned_builtin", "no exec/eval/compile/open/__import__/globals/locals/vars/breakpoint/input/setattr/delattr/type or other code-from-strings", "python", _check_banned_builtin,
         threat="running code from strings, reaching namespaces, files or dynamic attributes through builtins; "
                "a parameter or local of the same name (`forward(self, input)`) is the candidate's own and allowed",
         fix="do not call these builtins; use attribute access, `isinstance`, and torch/triton APIs (naming a parameter `input` is fine)"),
    Rule("dynamic_getattr", "getattr/hasattr need a string-literal name and must be called directly", "python", _check_dynamic_getattr,
         threat="computed attribute names that the static rules cannot see",
         fix='write the attribute directly (`torch.relu`) or use getattr with a literal name (`getattr(m, "weight")`)'),
    Rule("interpreter_internals", "no dunder attributes or names that reach interpreter internals (__class__, __subclasses__, __globals__, __builtins__, __dict__, __code__, __getattribute__ ...)", "python", _check_internals,
         threat="walking the class graph or function globals to reach os/builtins (`().__class__.__bases__[0].__subclasses__()`), "
                "or setting attributes behind the static rules' back; other dunders (`__name__`, `__init__`, `__call__`) reach nothing and are allowed",
         fix="use the public API of your objects; `isinstance` instead of `__class__`, explicit attributes instead of `__dict__`"),
    Rule("private_name", "no private `_x` members of modules the candidate did not define (torch._C, torch._dynamo, F._x ...)", "python", _check_private,
         threat="torch and triton internals (torch._C, torch._dynamo) that change global state, register hooks or skip the checks; "
                "private names the candidate defines (`_kernel`, `self._make_layer`, `_cpp_src`) are its own and allowed; "
                "`x._foo` on a value reaches only that object (its results are covered by the judge's output checks); "
                "nn.init's shape helpers `_calculate_fan_in_and_fan_out`/`_calculate_correct_fan` (nn.Linear's own init) compute and change nothing",
         fix="use the public torch/triton API (for an ATen op by name: torch.ops.aten.<op>); your own `_names` are fine"),
    Rule("missing_model_new", "the module must define exactly one module-level `class ModelNew` (or bind `ModelNew = <a class of this module>` once)", "python", _check_model_new,
         threat="a `ModelNew` that is rebound, conditional or not the candidate's own class; `ModelNew = ModelNew` after the class binds the same class again and is allowed",
         fix="define `class ModelNew(nn.Module)` at module level, or alias your class once: `ModelNew = OptimizedModel`"),
    Rule("tensor_subclass", "no tensor subclasses, __torch_function__ or __torch_dispatch__", "python", _check_tensor_subclass,
         threat="outputs whose comparisons or operators lie (a subclass whose allclose is always True)",
         fix="return plain torch.Tensor outputs; subclass nn.Module, not Tensor/Parameter"),
    Rule("class_base", "classes may derive only from nn.Module (and torch.nn classes), autograd.Function, Enum, NamedTuple, object or classes of this module", "python", _check_class_base,
         threat="inheriting behaviour (dict, type, library internals) that the rules do not model",
         fix="derive from nn.Module, torch.autograd.Function, object or your own classes"),
    Rule("class_keyword", "no metaclass or other class keywords", "python", _check_class_keyword,
         threat="metaclasses run code at class creation and change attribute access",
         fix="remove `metaclass=` and other class keywords"),
    Rule("attribute_assignment", "no assignment to attributes of modules, classes or objects the candidate did not create (F.relu = ..., torch.Tensor.add = ..., the load_inline extension, Triton kernels), nor handing tensor classes, the extension or kernels around as values", "python", _check_attribute_assignment,
         threat="monkeypatching torch/triton or the extension's entry points and kernels, which the harness in the candidate process "
                "stubs (no_kernel ablation) and uses to check outputs; writes to the candidate's own objects "
                "(`self.x`, `self.conv.weight.data`, a local module) are allowed -- patching a library class the harness does not use "
                "changes only the candidate's own computation, which the judge checks",
         fix="keep state on your own objects (`self.x = ...`, `self.conv.weight.data = ...`); call library functions instead of replacing them, "
             "and do not pass tensor classes, the extension or kernels around as values"),
    Rule("class_attribute_access", "methods must be called on instances, not through the class", "python", _check_class_attribute_access,
         threat="calling a method with a foreign object as `self` (`Patcher.put(nn.functional, abs)`) to patch it",
         fix="create an instance and call the method on it (staticmethods may be called through the class)"),
    Rule("decorator_not_allowed", "only @triton.jit, @triton.autotune, @triton.heuristics, @staticmethod, @functools.*, @torch.no_grad and @torch.inference_mode decorators", "python", _check_decorators,
         threat="decorators run arbitrary code at definition time and can replace functions",
         fix="use only the listed decorators; call helpers explicitly instead"),
    Rule("string_annotation", "annotations must be expressions, not strings (strings can be evaluated later)", "python", _check_string_annotation,
         threat="code hidden in strings that typing machinery evaluates later",
         fix="write annotations as expressions (`x: torch.Tensor`), or leave them out"),
    Rule("banned_module", "no access to sys, os, builtins, inspect, gc, ctypes, importlib, pickle, subprocess, socket, threading, io, pathlib, ... or modules re-exported by other modules", "python", _check_banned_module,
         threat="OS, interpreter and file access reached through an attribute of an allowed module (`torch.os`)",
         fix="do not reach modules through other modules; use only torch/triton/math/numpy APIs"),
    Rule("module_as_value", "modules may only be used as `module.attribute`, never stored or passed", "python", _check_module_as_value,
         threat="a module object in a variable escapes the static attribute checks (`c = torch.cuda; c.Stream()`)",
         fix="write the full attribute path at each use (`torch.cuda.synchronize()`), or import the name (`from torch import nn`)"),
    Rule("threads_processes", "no threads, processes, distributed or thread-count changes", "python", _path_check("threads_processes"),
         threat="work done outside the timed call, or changing the thread budget the reference is timed with",
         fix="compute in the calling thread; do not change thread counts"),
    Rule("streams_events_graphs", "no CUDA streams, events or graphs", "python", _path_check("streams_events_graphs"),
         threat="work on a side stream escapes the CUDA events on the current stream; graphs replay stale work",
         fix="launch on the current stream (the default); do not create streams, events or graphs"),
    Rule("compile_jit", "no torch.compile, torch.jit, torch.fx, jiterator or other compilers", "python", _path_check("compile_jit"),
         threat="compilers that cache across processes and run code generation outside the sandboxed compile stage",
         fix="write the kernel with load_inline (C++/CUDA) or triton.jit"),
    Rule("torch_backends", "no torch.backends settings", "python", _path_check("torch_backends"),
         threat="global settings (TF32, cudnn benchmark/determinism) that change precision or the reference's behaviour",
         fix="do not touch torch.backends; pass precision choices to your own kernels"),
    Rule("profiler", "no profilers", "python", _path_check("profiler"),
         threat="profiler hooks observe and alter the harness's timing",
         fix="remove profiler calls (korch measures timing itself)"),
    Rule("custom_op_registration", "no custom operator registration or native library loading (torch.library, torch.ops.load_library, torch.classes)", "python", _path_check("custom_op_registration"),
         threat="registering operators replaces ATen ops for the harness too; loading libraries bypasses the compile stage",
         fix="expose kernels through load_inline(functions=[...]) and call them directly"),
    Rule("cpp_extension_other", "only load_inline may be used from torch.utils.cpp_extension", "python", _path_check("cpp_extension_other"),
         threat="load()/CppExtension build from files and paths outside the compile cache",
         fix="use torch.utils.cpp_extension.load_inline with the sources as strings"),
    Rule("torch_utils", "nothing from torch.utils except cpp_extension.load_inline", "python", _path_check("torch_utils"),
         threat="torch.utils reaches data loaders, hooks, checkpoints and files",
         fix="use only torch.utils.cpp_extension.load_inline"),
    Rule("triton_api", "only triton.jit/autotune/heuristics/Config/cdiv/next_power_of_2 and triton.language (no inline asm)", "python", _path_check("triton_api"),
         threat="triton.runtime/compiler internals (driver, caches, launchers) and inline assembly",
         fix="use triton.jit, autotune, heuristics, Config, cdiv, next_power_of_2 and triton.language"),
    Rule("file_os_network", "no file, OS or network access (torch.save/load/from_file, numpy load/save/memmap, tofile, hub ...)", "python", _path_check("file_os_network"),
         threat="reading cached results or secrets, writing outside the job",
         fix="compute outputs from the inputs; do not load or save files"),
    Rule("seeding", "no seeding or RNG state access (torch.manual_seed, generators, numpy.random)", "python", _path_check("seeding"),
         threat="predicting the judge's inputs by reseeding or reading RNG state (the judge draws them from a secret seed in its own process); "
                "a generator of the candidate's own, `torch.Generator().manual_seed(S)`, touches no global state and is allowed",
         fix="do not seed or read RNG state; weights are initialised by the harness with the reference's seed"),
    Rule("frame_access", "no frame, code or generator internals (gi_frame, f_back, f_globals, tb_frame ...)", "python", _check_frame_access,
         threat="reaching the caller's frame to rewrite the harness's variables (`sys._getframe(1).f_globals[...] = fake`)",
         fix="do not touch frames, code objects or generator internals"),
    Rule("precision_downgrade", "no half/bfloat16/int8/TF32/autocast under tolerance 'strict' (fp32 tasks)", "python", _check_precision,
         threat="trading precision for speed on fp32 tasks; a dtype only compared (`x.dtype in (torch.float16, torch.bfloat16)`) casts nothing, "
                "nor does code for inputs that already are half/bfloat16 (`if x.dtype == torch.float16:`): "
                "both allowed, the judge's strict tolerance backs them (and, as for every rule, code that cannot run -- "
                "`if __name__ == \"__main__\":`, a module-level function nothing names, such as a copied `get_inputs` -- is not checked)",
         fix='compute in float32 under strict tolerance (tl.dot(..., input_precision="ieee")); use tolerance tf32 if the campaign allows it'),
    Rule("load_inline_usage", "load_inline must be called directly, not stored or passed", "load_inline", _check_load_inline_usage,
         threat="calls with arguments the rules cannot resolve, building code the compile stage never saw",
         fix="call load_inline(...) directly with its arguments written out"),
    Rule("load_inline_dynamic", "load_inline arguments must be statically resolvable (literals, module-level constants bound once, +, f-strings, .format, join)", "load_inline", _load_inline_findings("load_inline_dynamic"),
         threat="sources computed at run time would be compiled without the native checks",
         fix="build the sources from string literals and module-level constants bound once (+, f-strings, .format, join)"),
    Rule("load_inline_argument", "load_inline takes name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags (toolkit libraries only), with_cuda, verbose (no include paths or build_directory)", "load_inline", _load_inline_findings("load_inline_argument"),
         threat="include paths and build directories read or write files outside the compile cache",
         fix="pass only name, cpp_sources, cuda_sources, functions (a list of entry points), extra_cflags, extra_cuda_cflags, extra_ldflags, with_cuda, verbose"),
    Rule("compiler_flag", "compiler flags must be on the allowlist (-O*, -std=c++NN, -DNAME[=VALUE], -arch/-gencode, ...); extra_ldflags may only name -lcublas, -lcublasLt, -lcurand, -lcudart", "flags", _check_flag_units("compiler_flag"),
         threat="flags that load plugins, change search paths, include or link arbitrary files (-B, -fplugin, -specs, -Wl,..., -include, -L); "
                "debug info (-g, -lineinfo) and -O levels change no result and are allowed, in extra_ldflags too",
         fix="use only -O*, -std=c++NN, -D/-U, -arch/-gencode, -lineinfo, warning flags ...; link only -lcublas/-lcublasLt/-lcurand/-lcudart"),
    Rule("fast_math_strict", "fast-math flags are not allowed under tolerance 'strict'", "flags", _check_flag_units("fast_math_strict"),
         threat="trading precision for speed on fp32 tasks",
         fix="drop --use_fast_math/-ffast-math under strict tolerance (use intrinsics like __expf where the error is acceptable, or tolerance tf32)"),
    Rule("native_stream_event_graph", "native code: no CUDA stream, event or graph APIs (use the current stream)", "native", _check_native("native_stream_event_graph"),
         threat="work on a side stream escapes the CUDA events on the current stream",
         fix="launch with <<<grid, block, smem, at::cuda::getCurrentCUDAStream()>>> (or the default stream); create no streams, events or graphs"),
    Rule("native_python_api", "native code: no Python C API or pybind11", "native", _check_native("native_python_api"),
         threat="reaching the interpreter (and the harness's objects) from native code",
         fix="take and return torch::Tensor and scalars; load_inline writes the bindings"),
    Rule("native_syscall", "native code: no system calls, processes, dynamic loading, memory mapping or sockets", "native", _check_native("native_syscall"),
         threat="OS access from native code (the sandbox and seccomp are the backstop)",
         fix="compute only; report errors with TORCH_CHECK instead of exit()"),
    Rule("native_file_io", "native code: no file I/O (printing to stdout/stderr is fine)", "native", _check_native("native_file_io"),
         threat="reading cached results or secrets, writing outside the job; writing to stdout/stderr is allowed like Python's print",
         fix="do not open, name or read files; printf/std::cout/fprintf(stderr, ...) are fine"),
    Rule("native_getenv", "native code: no environment access", "native", _check_native("native_getenv"),
         threat="reading secrets from the environment",
         fix="do not read environment variables; pass settings as arguments"),
    Rule("native_asm", "native code: no inline assembly", "native", _check_native("native_asm"),
         threat="raw system calls and instructions the source rules cannot see",
         fix="use CUDA intrinsics (__shfl_sync, __ldg, atomicAdd ...) instead of asm"),
    Rule("native_include", "native code: #include only torch/ATen/c10, the CUDA toolkit's headers (cuda.h, cuda_runtime.h, cublas_v2.h, curand_kernel.h, cub/block/, math_constants.h, mma.h ...) and the C/C++ standard library (no files, threads, clocks)", "native", _check_native("native_include"),
         threat="#include reads any file a path names (its text lands in the compile log) and system headers declare the OS; "
                "what included code may call is decided by the identifier rules and the undefined-symbol allowlist",
         fix="include headers by name from torch, the CUDA toolkit or the C/C++ standard library; no paths, no OS headers"),
    Rule("native_macro", "native code: no token pasting (##), digraphs, trigraphs, universal character names or non-ASCII code", "native", _check_native("native_macro"),
         threat="spelling banned names that the identifier rules would not see (`fo##pen`)",
         fix="write identifiers out in full ASCII; use #x stringification or plain macros instead of ##"),
    Rule("native_preprocessor", "native code: no pragmas other than once/unroll, no _Pragma, __has_include or unknown directives", "native", _check_native("native_preprocessor"),
         threat="pragmas that change optimisation or diagnostics and probing for files with __has_include",
         fix="use only #pragma once and #pragma unroll; remove other pragmas"),
    Rule("native_thread", "native code: no threads (std::thread, pthread, std::async, OpenMP)", "native", _check_native("native_thread"),
         threat="work outside the timed call or across more CPU threads than the reference gets",
         fix="compute in the calling thread; parallelise on the GPU"),
    Rule("native_custom_op", "native code: no operator registration, global torch settings or load-time constructors", "native", _check_native("native_custom_op"),
         threat="replacing ATen operators for the harness, or code that runs when the library loads",
         fix="expose plain functions through load_inline(functions=[...])"),
    Rule("native_driver_api", "native code: no CUDA driver API, NVRTC or IPC", "native", _check_native("native_driver_api"),
         threat="driver calls that launch, load or share memory behind the runtime's and the harness's back",
         fix="use the CUDA runtime API (<<<...>>> launches, cudaMalloc via torch allocations); including <cuda.h> for types is fine"),
    Rule("native_precision", "native code: no half/bfloat16/TF32 under tolerance 'strict'", "native", _check_native("native_precision"),
         threat="trading precision for speed on fp32 tasks",
         fix="compute in float under strict tolerance; use tolerance tf32/fp16 if the campaign allows it"),
    Rule("native_symbol", "the built library imports a symbol outside the allowlist", "symbols",
         threat="macros and headers can spell calls the source rules never see: the compiled library's imports are checked "
                "(libc math/memory/printf, CUDA runtime without streams/events/graphs, cuBLAS compute, torch, libstdc++ without files/threads)",
         fix="call only torch/ATen, CUDA runtime, cuBLAS, libc math/memory and printf-style output from native code"),
]
RULES_BY_ID = {r.id: r for r in RULES}
assert len(RULES_BY_ID) == len(RULES), "duplicate rule id"


assert all(r.threat and r.fix for r in RULES), "every rule names its threat and its fix"


def rule_table() -> list[dict]:
    return [{"id": r.id, "message": r.message, "stage": r.stage, "threat": r.threat, "fix": r.fix}
            for r in RULES]


def violation(rule_id: str, line: int, detail: str = "") -> dict:
    """A violation record: the message says what is wrong and how to fix it."""
    rule = RULES_BY_ID[rule_id]
    msg = f"{rule.message}: {detail}" if detail else rule.message
    return {"rule": rule.id, "line": int(line or 0), "message": f"{msg}. Fix: {rule.fix}", "fix": rule.fix}


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def _triton_kernels(ctx: Context) -> list[str]:
    out = []
    for n in ctx.walk(ast.FunctionDef):
        for d in n.decorator_list:
            if _decorator_name(ctx, d) == "triton.jit":
                out.append(n.name)
    return out


def _main_test(test) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    a, b = test.left, test.comparators[0]
    is_name = lambda e: isinstance(e, ast.Name) and e.id == "__name__"  # noqa: E731
    is_main = lambda e: isinstance(e, ast.Constant) and e.value == "__main__"  # noqa: E731
    return (is_name(a) and is_main(b)) or (is_main(a) and is_name(b))


def _drop_main_blocks(tree: ast.Module) -> None:
    """Empties the body (not the else) of each module-level
    `if __name__ == "__main__":`. The worker loads a candidate as a module
    of another name, so that code never runs there; models write test code
    in it (`import time`, the reference `Model`, `.half()` benchmarks).
    Only where nothing in the module binds `__name__`."""
    for n in ast.walk(tree):
        bound = ((isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load))
                 or (isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == "__name__")
                 or (isinstance(n, ast.ExceptHandler) and n.name == "__name__")
                 or (isinstance(n, ast.arg) and n.arg == "__name__")
                 or (isinstance(n, (ast.Global, ast.Nonlocal)) and "__name__" in n.names)
                 or (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == "__name__"))
        if bound:
            return
    for n in tree.body:
        if isinstance(n, ast.If) and _main_test(n.test):
            n.body = [ast.copy_location(ast.Pass(), n.body[0])]


def _names_used(nodes) -> set:
    """Every name a piece of code may use to reach a function: loaded
    names, attribute names and string constants (`getattr(m, "f")`)."""
    out = set()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value)
    return out


def _drop_dead_functions(tree: ast.Module) -> None:
    """Empties the body of each module-level, undecorated function that no
    other code of the module names (a copied `get_inputs`, a benchmark
    helper the `__main__` block called): the worker only builds and calls
    ModelNew, so that body never runs. Its defaults and annotations, which
    run at definition, stay. Repeated until nothing more is dropped."""
    changed = True
    while changed:
        changed = False
        # (a dunder such as a module-level `__getattr__` is called by Python itself)
        fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and not n.decorator_list and not _is_dunder(n.name)
               and not (len(n.body) == 1 and isinstance(n.body[0], ast.Pass))]
        for f in fns:
            others = [n for n in tree.body if n is not f]
            # (its own signature -- defaults, annotations -- runs at definition)
            signature = [f.args] + ([f.returns] if f.returns else [])
            if f.name not in _names_used(others + signature):
                f.body = [ast.copy_location(ast.Pass(), f.body[0])]
                changed = True


def check(source: str, *, tolerance: str = "strict", torch_ops: str = "allow") -> dict:
    """Run every static rule on a candidate module. JSON-able result."""
    if tolerance not in TOLERANCES:
        raise ValueError(f"tolerance must be one of {TOLERANCES}")
    if torch_ops not in TORCH_OPS_POLICIES:
        raise ValueError(f"torch_ops must be one of {TORCH_OPS_POLICIES}")
    result = {"ok": False, "violations": [], "load_inline": [], "entry_points": [],
              "language": "torch", "tolerance": tolerance, "torch_ops": torch_ops,
              "rules_version": RULES_VERSION}
    raw = source.encode("utf-8", "surrogatepass")
    try:
        tree = ast.parse(raw, filename="<candidate>")
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None) or 0
        result["violations"].append(violation("syntax_error", line, str(e.msg if isinstance(e, SyntaxError) else e)))
        return result
    _drop_main_blocks(tree)
    _drop_dead_functions(tree)
    ctx = Context(source, tree, tolerance, torch_ops)
    seen = set()
    violations = []
    for rule in RULES:
        if rule.check is None:
            continue
        for line, detail in rule.check(ctx):
            key = (rule.id, line, detail)
            if key in seen:
                continue
            seen.add(key)
            violations.append(violation(rule.id, line, detail))
    violations.sort(key=lambda v: (v["line"], v["rule"]))
    result["violations"] = violations
    result["ok"] = not violations
    result["load_inline"] = ctx.load_inline_calls
    entry = [f for c in ctx.load_inline_calls for f in c["functions"]]
    entry += _triton_kernels(ctx)
    result["entry_points"] = entry
    if any(c["cuda_sources"] for c in ctx.load_inline_calls):
        result["language"] = "cuda"
    elif ctx.load_inline_calls or any(ctx.is_load_inline_call(c) for c in ctx.walk(ast.Call)):
        result["language"] = "cpp"
    elif _triton_kernels(ctx) or any(p.startswith("triton") for p in ctx.import_aliases.values()):
        result["language"] = "triton"
    return result


def lint_file(path: str, *, tolerance: str = "strict", torch_ops: str = "allow") -> dict:
    """`korch lint`'s record for one file: {"file", "ok", "violations"}.
    Reads the file as bytes; a file that is not UTF-8 is a source_encoding
    violation (the worker writes candidates as UTF-8)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        src = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return {"file": path, "ok": False,
                "violations": [violation("source_encoding", raw[:e.start].count(b"\n") + 1,
                                         f"byte {e.start} is not UTF-8")]}
    res = check(src, tolerance=tolerance, torch_ops=torch_ops)
    return {"file": path, "ok": res["ok"], "violations": res["violations"]}


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="korch static rules")
    ap.add_argument("file", nargs="?", help="candidate module to check")
    ap.add_argument("--lint", nargs="+", metavar="FILE",
                    help="check each FILE; print one JSON object per file per line "
                         "({file, ok, violations}); exit 1 if any has a violation")
    ap.add_argument("--dump-table", action="store_true", help="print the rule table as JSON")
    ap.add_argument("--tolerance", default="strict", choices=TOLERANCES)
    ap.add_argument("--torch-ops", default="allow", choices=TORCH_OPS_POLICIES)
    ap.add_argument("--symbols", metavar="SO", help="check a built library's undefined symbols")
    ap.add_argument("--allow-extra", metavar="FILE", help="file of extra allowed symbols, one a line")
    args = ap.parse_args(argv)
    if args.dump_table:
        print(json.dumps(rule_table(), indent=1))
        return 0
    if args.symbols:
        extra = []
        if args.allow_extra:
            with open(args.allow_extra, encoding="utf-8") as f:
                extra = [ln.strip() for ln in f if ln.strip()]
        syms = undefined_symbols(args.symbols)
        v = check_symbols(syms, allow_extra=extra)
        print(json.dumps({"ok": not v, "undefined": syms, "needed": needed_libraries(args.symbols),
                          "violations": v}, indent=1))
        return 0 if not v else 1
    if args.lint:
        any_bad = False
        for path in args.lint:
            rec = lint_file(path, tolerance=args.tolerance, torch_ops=args.torch_ops)
            any_bad |= not rec["ok"]
            print(json.dumps(rec, ensure_ascii=False), flush=True)
        return 1 if any_bad else 0
    if not args.file:
        ap.error("give a FILE, --lint FILE..., --dump-table or --symbols")
    with open(args.file, encoding="utf-8") as f:
        src = f.read()
    res = check(src, tolerance=args.tolerance, torch_ops=args.torch_ops)
    print(json.dumps(res, indent=1))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
