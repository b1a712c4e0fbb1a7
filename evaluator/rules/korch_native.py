"""The C++/CUDA sources handed to load_inline: a small C lexer (line splices,
comments and literals stripped) and the identifier rules run over it."""
from __future__ import annotations

import re

from korch_rule_types import Finding

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
