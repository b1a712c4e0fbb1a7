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
import json
import os
import sys

# The rules are a package of sibling modules (below). `korch lint` runs this
# file with `python3 -I`, which leaves its folder off sys.path; the worker and
# the tests import it from a folder that is on it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import korch_elf  # noqa: E402  (the ELF reader)
import korch_symbols  # noqa: E402  (the symbol allowlist)
from korch_context import Context  # noqa: E402
from korch_inline import _check_flag_units  # noqa: E402
from korch_native import _check_native  # noqa: E402
from korch_policy import (  # noqa: E402
    _check_attribute_assignment, _check_banned_builtin, _check_banned_module,
    _check_class_attribute_access, _check_class_base, _check_class_keyword, _check_decorators,
    _check_dynamic_getattr, _check_frame_access, _check_global, _check_imports, _check_internals,
    _check_load_inline_usage, _check_match, _check_model_new, _check_module_as_value,
    _check_non_ascii_identifier, _check_precision, _check_private, _check_source_encoding,
    _check_star_import, _check_string_annotation, _check_tensor_subclass, _check_try,
    _decorator_name, _is_dunder, _load_inline_findings, _path_check,
)
from korch_rule_types import Rule  # noqa: E402

# The ELF reader, re-exported: the worker and the tests read symbols through
# this module.
ElfError = korch_elf.ElfError
needed_libraries = korch_elf.needed_libraries
undefined_symbols = korch_elf.undefined_symbols
undefined_symbols_of_objects = korch_elf.undefined_symbols_of_objects

RULES_VERSION = "4"  # 4: stop 32 (pybind11 argument casters); 2: stop 30 (held-out false rejections; defines_model retired)
# 3: exit/_exit/_Exit/quick_exit allowed in native code (a runner that exits is already an
#    error verdict); Triton combine functions (tl.associative_scan / tl.reduce); the symbol
#    verdict cached with a build is re-checked when this file changes

TOLERANCES = ("strict", "tf32", "fp16", "bf16")
TORCH_OPS_POLICIES = ("allow", "forbid")

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


def symbol_policy() -> str:
    """A digest of everything that decides a symbol verdict: the rules
    version, the allowlists and the code that reads them (korch_symbols,
    korch_elf). A compile cache entry records the policy its verdict was made
    under; an entry made under another is checked again from its objects (no
    recompile)."""
    return "rules-%s-%s" % (RULES_VERSION, korch_symbols.digest())


def check_symbols(undefined_symbols: list[str], allow_extra=()) -> list[dict]:
    """Violations for a built library's undefined dynamic symbols
    (korch_symbols.symbol_findings, as native_symbol records)."""
    return [violation("native_symbol", 0, why)
            for why in korch_symbols.symbol_findings(undefined_symbols, allow_extra)]


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
