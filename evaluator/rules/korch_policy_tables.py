"""The static rules' policy tables: data, not code. What a candidate may
import, call and subclass; which names and paths are internals; what
load_inline may be given. A leaf: it imports nothing of korch's."""
from __future__ import annotations

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
