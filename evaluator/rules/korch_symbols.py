"""The undefined-symbol allowlist: the second line of defence after a
candidate's native code is built (macros can spell names the source rules
never see). Part of the symbol policy's digest, with korch_elf.py."""
from __future__ import annotations

import re
from typing import Iterable

import korch_elf

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


def _read_digest() -> str:
    import hashlib

    h = hashlib.sha256()
    for path in (__file__, korch_elf.__file__):  # the allowlists, and what reads the symbols
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


# Read once, when the module is imported (the worker's zygote imports it
# before it forks any job).
_DIGEST = _read_digest()


def digest() -> str:
    """A digest of everything that decides a symbol verdict: this module's
    text (the allowlists and the code that reads them) and korch_elf's (the
    reader). korch_rules.symbol_policy() adds the rules version to it."""
    return _DIGEST


def symbol_findings(undefined_symbols: list[str], allow_extra: Iterable[str] = ()) -> list[str]:
    """What is wrong with a built library's undefined dynamic symbols: one
    "name (why)" per symbol outside the allowlist.

    `undefined_symbols`: names as `nm -D --undefined-only` or
    `korch_elf.undefined_symbols()` give them (a `@VERSION` suffix is ignored).
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
            out.append(f"{sym} ({why})")
    return out
