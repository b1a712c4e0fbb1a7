"""Tests for evaluator/rules/korch_rules.py (unittest; run from CTest or by hand):

    /usr/bin/python3 -m unittest discover -s tests/evaluator/rules -p 'test_*.py'

Every rule in the table has a violation case and a near-miss that must pass
(the near-miss is embedded in a complete, otherwise-clean candidate, so the
whole module must come back ok). The corpus under tests/evaluator/corpus is
checked too: every good/ and realistic/ file passes (realistic/ under the
tolerance its `# tolerance:` header names, strict by default), every hacks/
file whose header says `# expect: rule_violation <id>` is rejected with that
rule.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "evaluator" / "rules"))

import korch_rules as kr  # noqa: E402

CORPUS = REPO / "tests" / "evaluator" / "corpus"
# The vendored KernelBench problems beside the checkout (absent in some clones).
KERNELBENCH = REPO.parent / "shared" / "kernelbench"

PY_TEMPLATE = '''import torch
import torch.nn as nn
import functools
{top}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        {body}
        return torch.relu(x)
'''

NATIVE_TEMPLATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
{pre}
src = r"""
#include <torch/extension.h>
{native}
torch::Tensor fwd(torch::Tensor x) {{ return x; }}
"""

ext = load_inline({args})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.fwd(x)
'''
DEFAULT_ARGS = 'name="ext", cpp_sources=src, functions=["fwd"]'


def indent(code: str, n: int) -> str:
    return code.replace("\n", "\n" + " " * n)


def py(top="", init="pass", body="pass"):
    return PY_TEMPLATE.format(top=top, init=indent(init, 8), body=indent(body, 8))


def native(code="", pre="", args=DEFAULT_ARGS):
    return NATIVE_TEMPLATE.format(native=code, pre=pre, args=args)


def flags(cflags=None, cuda=None, ldflags=None):
    extra = ""
    if cflags is not None:
        extra += f", extra_cflags={cflags!r}"
    if cuda is not None:
        extra += f", extra_cuda_cflags={cuda!r}"
    if ldflags is not None:
        extra += f", extra_ldflags={ldflags!r}"
    return native(args=DEFAULT_ARGS + extra)


# rule id -> (violation module, near-miss module)
CASES: dict[str, tuple[str, str]] = {
    "syntax_error": (py(top="def f(:\n    pass"), py(top="x = 7 // 2  # floor division")),
    "source_encoding": ("# -*- coding: utf-7 -*-\n" + py(), "# -*- coding: utf-8 -*-\n" + py()),
    "non_ascii_identifier": (py(top="ｘ = 1"), py(top='x = "ｘ é ｅｖａｌ"  # ｅｖａｌ in a comment')),
    "import_not_allowed": (py(top="import os"),
                           py(top="import math\nimport numpy as np\nfrom typing import List\nfrom torch import nn as tnn")),
    "star_import": (py(top="from math import *"), py(top="from math import sqrt")),
    "try_except": (py(top="try:\n    y = 1\nexcept Exception:\n    y = 2"),
                   py(top='s = "try: ... except: ..."  # try/except in a comment')),
    "global_statement": (py(top="g = 0\ndef f():\n    global g\n    g = 1\nf()"),
                         py(top="def f():\n    g = 1\n    return g\nglobal_ = 'global g'\nf()")),
    "match_statement": (py(top="match 1:\n    case 1:\n        pass"), py(top="match = 1\ncase = match + 1")),
    "banned_builtin": (py(top='y = eval("1")'),
                       # Shadowing is not calling the builtin: a parameter `input`, a
                       # local `vars`, a parameter `type` that is then called.
                       py(top='y = "eval(1)"\ndef evaluate(v):\n    return v\n'
                              'def apply(input, type):\n    vars = [input]\n    return type(vars[0])\n'
                              'FNS = (evaluate, apply)',
                          body="self.eval()")),
    "dynamic_getattr": (py(top='name = "relu"\nf = getattr(torch, name)'),
                        py(top='f = getattr(torch, "relu")\nh = hasattr(torch, "relu")')),
    "private_name": (py(top="c = torch._C"),
                     # The candidate's own private names, and ATen ops by name.
                     py(top='x_ = "_private"\nname = "__init__"\n_BLOCK = 256\n_cpp_src = "// src"\n'
                            'def _helper(v):\n    return v\n'
                            'class _Impl(nn.Module):\n    def _make_layer(self, n):\n        self._n = n\n'
                            '        return self._helper2(n)\n    def _helper2(self, n):\n        return _helper(n)\n'
                            'sm = torch.ops.aten._softmax')),
    "interpreter_internals": (py(top="k = ().__class__"),
                              py(top='if __name__ == "__main__":\n    print(ModelNew.__name__, torch.__version__)\n'
                                     'class Box(nn.Module):\n    def __call__(self, v):\n        return v\n'
                                     '    def __repr__(self):\n        return "Box"')),
    "missing_model_new": (py().replace("class ModelNew", "class ModelNew2"),
                          py(top='NAME = "ModelNew"').replace("class ModelNew(", "class OptimizedModel(")
                          + "\n\nModelNew = OptimizedModel\n"),
    "tensor_subclass": (py(top="class T(torch.Tensor):\n    pass"),
                        py(top="class T(nn.Module):\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return x")),
    "class_base": (py(top="class T(dict):\n    pass"), py(top="class T(object):\n    pass\nclass U(T):\n    pass")),
    "class_keyword": (py(top="class T(nn.Module, metaclass=abc):\n    pass"),
                      py(top="class T(nn.Module):\n    metaclass = 1")),
    "attribute_assignment": (py(top="torch.relu = lambda v: v"),
                             # The candidate's own objects: self, its submodules' tensors,
                             # a local module, an autograd ctx, its own class.
                             py(top="class Fn(torch.autograd.Function):\n    @staticmethod\n"
                                    "    def forward(ctx, v, alpha):\n        ctx.alpha = alpha\n        return v * alpha\n"
                                    "class Cfg:\n    pass\nCfg.block = 128",
                                init="self.scale = 2.0\nself.items = [1]\nself.items[0] = 2\n"
                                     "self.conv = nn.Conv2d(3, 3, 3)\nself.conv.weight.data = self.conv.weight.data * 0.5\n"
                                     "conv = nn.Linear(4, 4)\nconv.bias = None\nself.fc = conv\n"
                                     "for p in self.fc.parameters():\n    p.requires_grad = False")),
    "class_attribute_access": (py(top="class H(nn.Module):\n    def go(self):\n        return 1\ny = H.go(None)"),
                               py(top="class H(nn.Module):\n    def go(self):\n        return 1\ny = H().go()")),
    "decorator_not_allowed": (py(top="@property\ndef f():\n    return 1"),
                              py(top="@functools.lru_cache(maxsize=None)\ndef f():\n    return 1")),
    "string_annotation": (py(top='def f(v: "torch.Tensor"):\n    return v'),
                          py(top='def f(v: torch.Tensor) -> torch.Tensor:\n    """A "string" docstring."""\n    return v\nF = f')),
    "banned_module": (py(top="p = torch.os.getcwd()"), py(top='osname = "os"\nsys_ = "sys"')),
    "module_as_value": (py(top="m = torch"), py(top="m = torch.relu\nn = torch.nn.ReLU()")),
    "threads_processes": (py(top="torch.set_num_threads(4)"), py(top="n_threads = 4  # torch.set_num_threads(4)")),
    "streams_events_graphs": (py(top="s = torch.cuda.Stream()"),
                              py(top="def sync():\n    torch.cuda.synchronize()\nS = sync")),
    "compile_jit": (py(top="f = torch.compile(torch.relu)"),
                    py(top="def compiled_relu(v):\n    return torch.relu(v)\nR = compiled_relu")),
    "torch_backends": (py(top="b = torch.backends.cudnn.is_available()"), py(top='backends = ["cpu"]')),
    "profiler": (py(top="p = torch.profiler.profile()"), py(top='profile_name = "torch.profiler"')),
    "custom_op_registration": (py(top='torch.ops.load_library("x.so")'),
                               py(top="op = torch.ops.aten.relu.default")),
    "cpp_extension_other": (py(top="from torch.utils.cpp_extension import load"),
                            py(top="from torch.utils.cpp_extension import load_inline\nimport torch.utils.cpp_extension")),
    "torch_utils": (py(top="d = torch.utils.data.DataLoader"), py(top="utils = 1")),
    "triton_api": (py(top="import triton\nr = triton.runtime.driver"),
                   py(top="import triton\nimport triton.language as tl\nn = triton.cdiv(10, 3)\nm = tl.maximum")),
    "file_os_network": (py(top='torch.save(torch.zeros(1), "x.pt")'),
                        py(top='def save_name():\n    return "torch.save"\nfilename = "x.pt"\nN = save_name')),
    "seeding": (py(top="torch.manual_seed(0)"), py(top="seed_value = 0  # torch.manual_seed(0)")),
    "frame_access": (py(top="def g():\n    yield\nf = g().gi_frame.f_back"),
                     py(top="def g():\n    yield 1\nfirst = next(g())\nframe_count = 1")),
    "precision_downgrade": (py(body="x = x.half()"), py(body="x = x.float()\nx = x.to(torch.float32)")),
    "load_inline_usage": ("from torch.utils.cpp_extension import load_inline\nli = load_inline\n" + py(), native()),
    "load_inline_dynamic": (native(args='name="ext", cpp_sources=src.upper(), functions=["fwd"]'),
                            native(pre='VERSION = "v{}".format(1)\nHEADER = f"// {VERSION}"\n',
                                   args='name="ext", cpp_sources=[HEADER + "\\n" + src], functions=["fwd"]')),
    "load_inline_argument": (native(args=DEFAULT_ARGS + ', build_directory="/tmp/x"'),
                             native(args=DEFAULT_ARGS + ", verbose=True, with_cuda=False")),
    "compiler_flag": (flags(cflags=["-O3", "-Wl,-rpath,/tmp"]),
                      flags(cflags=["-O3", "-DBLOCK=256", "-Wall", "-march=native", "-std=c++17"],
                            cuda=["-O3", "-arch=sm_90", "--expt-relaxed-constexpr", "-gencode",
                                  "arch=compute_90,code=sm_90", "-Xptxas=-v"],
                            ldflags=["-lcublas", "-lcublasLt", "-lcurand"])),
    "fast_math_strict": (flags(cflags=["-ffast-math"]), flags(cflags=["-O3", "-funroll-loops"])),
    "native_stream_event_graph": (native("cudaStream_t s;\nvoid f() { cudaStreamCreate(&s); }"),
                                  native('// cudaStreamCreate in a comment\nconst char* k = "cudaEventRecord";\n'
                                         "void g() { cudaStream_t s = nullptr; (void)s; }")),
    "native_python_api": (native('void f() { PyRun_SimpleString("x"); }'),
                          native("int python_free = 1; // PyObject")),
    "native_syscall": (native("long f() { return syscall(SYS_open, 0, 0); }"),
                       native("int sys_call_count = 0; // syscall(SYS_open)\n"
                              "struct S { int n; }; int g(S* s) { return s->n; }")),
    "native_file_io": (native('void f() { FILE* fp = fopen("/etc/passwd", "r"); }'),
                       # Printing to the streams the process has is not file I/O.
                       native('#include <cstdio>\n#include <iostream>\n'
                              'const char* p = "fopen"; /* fopen */ int fopen_count = 0;\n'
                              'void report(int n) { printf("%d\\n", n); fprintf(stderr, "n=%d\\n", n);'
                              ' std::cout << n << std::endl; fflush(stdout); }')),
    "native_getenv": (native('const char* e = getenv("HOME");'), native("int getenv_calls = 0;")),
    "native_asm": (native('void f() { asm volatile("nop"); }'), native("int asm_free = 0; // asm")),
    "native_include": (native("#include <fstream>"),
                       # The toolkit's own headers and the standard library.
                       native("#include <cmath>\n#include <ATen/ATen.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
                              "#include <cublas_v2.h>\n#include <curand_kernel.h>\n#include <math_constants.h>\n"
                              "#include <cub/block/block_reduce.cuh>\n#include <cuda_fp16.h>\n#include <mma.h>\n"
                              "#include <cooperative_groups.h>\n#include <cstdio>\n#include <iostream>\n#include <vector>\n"
                              "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>")),
    "native_macro": (native('#define F(a,b) a##b\nvoid g() { F(fo,pen)("x","r"); }'),
                     native("#define SQR(a) ((a)*(a))\nfloat sq(float v) { return SQR(v); }\n"
                            "const char* s = \"a##b\"; int n = 1'000'000;")),
    "native_preprocessor": (native('#pragma GCC optimize("O0")'), native("#pragma once\n#pragma unroll")),
    "native_thread": (native("void f() { std::thread t([]{}); t.join(); }"),
                      native("int thread = 0; int n_threads = thread + 1;")),
    "native_custom_op": (native('TORCH_LIBRARY(mylib, m) { m.def("f(Tensor x) -> Tensor"); }'),
                         native("int library_version = 1;")),
    "native_driver_api": (native("void f() { cuLaunchKernel(0,0,0,0,0,0,0,0,0,0,0); }"),
                          native("int cuda_blocks = 1; // cuLaunchKernel")),
    "native_precision": (native("at::Tensor h(at::Tensor x) { return x.to(at::kHalf); }"),
                         native("at::Tensor h(at::Tensor x) { return x.to(at::kFloat); }")),
}


def rules_of(result):
    return {v["rule"] for v in result["violations"]}


class RuleTableTest(unittest.TestCase):
    def test_ids_unique_and_messages_one_line(self):
        ids = [r.id for r in kr.RULES]
        self.assertEqual(len(ids), len(set(ids)))
        for r in kr.RULES:
            self.assertRegex(r.id, r"^[a-z][a-z0-9_]*$")
            self.assertTrue(r.message and "\n" not in r.message, r.id)

    def test_every_rule_has_cases(self):
        covered = set(CASES) | {"native_symbol"}  # native_symbol: SymbolTest below
        self.assertEqual(covered, {r.id for r in kr.RULES})

    def test_every_rule_names_threat_and_fix(self):
        for r in kr.RULES:
            with self.subTest(rule=r.id):
                self.assertTrue(r.threat and "\n" not in r.threat)
                self.assertTrue(r.fix and "\n" not in r.fix)

    def test_docs_list_every_rule(self):
        """docs/rules.md carries the table (regenerate it from --dump-table)."""
        doc = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
        for r in kr.RULES:
            with self.subTest(rule=r.id):
                self.assertIn(f"| `{r.id}` |", doc)
                self.assertIn(r.threat.replace("|", "\\|"), doc)

    def test_dump_table_cli(self):
        out = subprocess.run([sys.executable, str(REPO / "evaluator/rules/korch_rules.py"), "--dump-table"],
                             check=True, capture_output=True, text=True).stdout
        import json
        table = json.loads(out)
        self.assertEqual([t["id"] for t in table], [r.id for r in kr.RULES])


class RuleCaseTest(unittest.TestCase):
    def test_violations(self):
        for rule_id, (bad, _) in CASES.items():
            with self.subTest(rule=rule_id):
                res = kr.check(bad)
                self.assertFalse(res["ok"])
                self.assertIn(rule_id, rules_of(res), res["violations"])
                for v in res["violations"]:
                    self.assertIsInstance(v["line"], int)
                    self.assertTrue(v["message"])

    def test_near_misses_pass(self):
        for rule_id, (_, good) in CASES.items():
            with self.subTest(rule=rule_id):
                res = kr.check(good)
                self.assertTrue(res["ok"], res["violations"])


class PolicyTest(unittest.TestCase):
    def test_tf32_tolerance_allows_casts_and_fast_math(self):
        self.assertTrue(kr.check(CASES["precision_downgrade"][0], tolerance="tf32")["ok"])
        self.assertTrue(kr.check(CASES["fast_math_strict"][0], tolerance="tf32")["ok"])
        self.assertTrue(kr.check(CASES["native_precision"][0], tolerance="fp16")["ok"])

    def test_policy_is_reported(self):
        res = kr.check(py(), torch_ops="forbid")
        self.assertEqual(res["torch_ops"], "forbid")
        self.assertEqual(res["tolerance"], "strict")
        with self.assertRaises(ValueError):
            kr.check(py(), torch_ops="maybe")

    def test_tl_dot_needs_ieee_under_strict(self):
        src = py(top="import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b)\nK = k")
        self.assertIn("precision_downgrade", rules_of(kr.check(src)))
        ok = src.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="ieee")')
        self.assertTrue(kr.check(ok)["ok"], kr.check(ok)["violations"])


class RuleAsserts(unittest.TestCase):
    """ok(src): the rules pass it; expect(src, rule): they refuse it with `rule`."""

    def ok(self, src, **kw):
        res = kr.check(src, **kw)
        self.assertTrue(res["ok"], res["violations"])

    def expect(self, src, rule, **kw):
        res = kr.check(src, **kw)
        self.assertFalse(res["ok"])
        self.assertIn(rule, rules_of(res), res["violations"])


class HackTest(RuleAsserts):
    """Rule-side hacks from the reward-hacking corpus (inline variants)."""

    def test_nfkc_lookalikes(self):
        self.expect(py(top='y = ｅｖａｌ("1")'), "banned_builtin")
        self.expect(py(top='y = ｅｖａｌ("1")'), "non_ascii_identifier")
        self.expect(py(top="import ｏｓ"), "import_not_allowed")
        self.expect(py(top="p = torch.ｏｓ"), "banned_module")
        self.expect(py(top='f = getattr(torch, "ｏｓ")'), "banned_module")

    def test_fstring_expressions(self):
        self.expect(py(top="s = f\"{__import__('os')}\""), "banned_builtin")
        self.expect(py(top="s = f\"{__import__('os')}\""), "interpreter_internals")
        self.expect(py(top="s = f'{x!r:>{eval(\"1\")}}'"), "banned_builtin")

    def test_computed_getattr(self):
        self.expect(py(top='f = getattr(torch, "ma" + "x")'), "dynamic_getattr")
        self.expect(py(top="import functools\nf = functools.reduce(getattr, ['cuda'], torch)"), "dynamic_getattr")
        self.expect(py(top='f = getattr(torch, "_C")'), "private_name")

    def test_dunder_escapes(self):
        self.expect(py(top="k = ().__class__.__bases__[0].__subclasses__()"), "interpreter_internals")
        self.expect(py(top='b = __builtins__["eval"]'), "interpreter_internals")
        self.expect(py(top="def f():\n    pass\ng = f.__globals__"), "interpreter_internals")
        self.expect(py(top='d = torch.nn.functional.__dict__'), "interpreter_internals")
        self.expect(py(top='v = torch.__getattr__("_dynamo")'), "interpreter_internals")
        self.expect(py(top="m = torch.Tensor.mro()"), "interpreter_internals")
        self.expect(py(top="import torch.nn.functional as F\nd = F.gelu.__kwdefaults__"), "interpreter_internals")
        self.expect(py(top='x = getattr(torch, "__dict__")'), "interpreter_internals")
        # `if __name__ == "__main__":` reads a harmless dunder.
        res = kr.check(py(top="if __name__ == '__main__':\n    print(torch.__version__)"))
        self.assertTrue(res["ok"], res["violations"])

    def test_private_members_of_modules(self):
        self.expect(py(top="import torch._dynamo"), "private_name")
        self.expect(py(top="from torch import _C"), "private_name")
        self.expect(py(top="from torch._C import _nn"), "private_name")
        self.expect(py(top="import torch.nn.functional as F\nf = F._verify_batch_size"), "private_name")
        self.expect(py(top="f = torch.Tensor._make_subclass"), "private_name")
        self.expect(py(top="import torch.nn.functional as _F\nf = _F._pad"), "private_name")

    def test_builtins_resolve_by_scope(self):
        # Bound only conditionally, deleted, or bound after use: the builtin shows through.
        self.expect(py(top='if len("x") == 2:\n    eval = None\ny = eval("1")'), "banned_builtin")
        self.expect(py(top='eval = None\ndel eval\ny = eval("1")'), "banned_builtin")
        self.expect(py(top="y = vars()\nvars = dict"), "banned_builtin")
        self.expect(py(top="for vars in [1]:\n    pass\ny = vars(torch)"), "banned_builtin")
        self.expect(py(top="class C:\n    if len('x') == 2:\n        type = int\n    t = type(1)"), "banned_builtin")
        self.expect(py(top="def f(v=type):\n    return v"), "banned_builtin")
        self.expect(py(top="def f():\n    return [open for _ in range(1)]\nF = f"), "banned_builtin")
        # The candidate's own bindings: parameters, locals, enclosing functions,
        # module names bound before use, comprehension variables.
        ok = py(top="def f(input, type, vars):\n    return type(input), vars\n"
                    "def g():\n    compile = len\n    def h():\n        return compile('ab')\n    return h()\n"
                    "input = 3\ndef k():\n    return input + 1\n"
                    "z = [type for type in (int, float)]\n"
                    "class C:\n    vars = 1\n    w = vars + 1\n"
                    "FNS = (f, g, k)",  # named, so their bodies are checked
                body="input = x\nx = torch.relu(input)")
        res = kr.check(ok)
        self.assertTrue(res["ok"], res["violations"])

    def test_model_and_subclasses(self):
        self.expect(py(top="class P(nn.Parameter):\n    pass"), "tensor_subclass")
        self.expect(py(top="class T(nn.Module):\n    def __torch_function__(self):\n        pass"), "tensor_subclass")
        self.expect(py(body="x = x.as_subclass(torch.Tensor)"), "tensor_subclass")

    def test_monkeypatching(self):
        self.expect(py(top="import torch.nn.functional as F\nF.relu = torch.abs"), "attribute_assignment")
        self.expect(py(top="del torch.relu"), "attribute_assignment")
        self.expect(py(top="for torch.relu in [torch.abs]:\n    pass"), "attribute_assignment")
        self.expect(py(top="torch.backends.cudnn.benchmark = True"), "attribute_assignment")
        self.expect(py(top="torch.Tensor.add = lambda a, b: a"), "attribute_assignment")
        self.expect(py(top="from torch import Tensor\nTensor.detach = lambda t: t"), "attribute_assignment")
        self.expect(py(top="import numpy as np\nnp.sctypeDict.update({})"), "attribute_assignment")
        # A tensor class handled as a value could be patched where it lands.
        self.expect(py(top="T = torch.Tensor\nT.detach = lambda t: t"), "attribute_assignment")
        self.expect(py(top="def f(self):\n    self.detach = 1\nf(torch.Tensor)"), "attribute_assignment")
        self.expect(py(top="K = [nn.Parameter]"), "attribute_assignment")
        self.expect(py(top='T = getattr(torch, "Tensor")'), "attribute_assignment")

    def test_patching_extension_and_kernels(self):
        # The ablation stubs the extension's entry points and Triton kernels:
        # writing into them, or handing them to code that could, is refused.
        ext_patch = native() + "\next.fwd = torch.relu\n"
        self.expect(ext_patch, "attribute_assignment")
        self_patch = native().replace("super().__init__()", "super().__init__()\n        self.ext = ext\n"
                                      "        self.ext.fwd = torch.relu")
        self.expect(self_patch, "attribute_assignment")
        alias_patch = native() + "\nmod = ext\nmod.fwd = torch.relu\n"
        self.expect(alias_patch, "attribute_assignment")
        passed = native() + "\ndef patch(m):\n    m.fwd = torch.relu\npatch(ext)\n"
        self.expect(passed, "attribute_assignment")
        listed = native() + "\nmods = [ext]\n"
        self.expect(listed, "attribute_assignment")
        built = native(pre="def build():\n    return load_inline(name=\"ext\", cpp_sources=\"x\", functions=[\"fwd\"])\n"
                           "other = build()\nother.fwd = torch.relu\n")
        self.expect(built, "attribute_assignment")
        kernel = "import triton\nimport triton.language as tl\n" + py(
            top="@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n_k.run = None")
        self.expect(kernel, "attribute_assignment")
        kernel_arg = "import triton\nimport triton.language as tl\n" + py(
            top="@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n"
                "def launch(kern, v):\n    kern.run = None\nlaunch(_k, 1)")
        self.expect(kernel_arg, "attribute_assignment")
        # A name rebound to a library function, or a method name that is
        # also a library method's, is not the candidate's function.
        rebound = native() + ("\nimport functools\ndef helper(m, f):\n    pass\n"
                              "helper = functools.update_wrapper\ndef fake():\n    pass\n"
                              "fake.fwd = torch.relu\nhelper(ext, fake)\n")
        self.expect(rebound, "attribute_assignment")
        appended = native().replace("super().__init__()", "super().__init__()\n        self.items = []\n"
                                    "        self.items.append(ext)\n        self.items[0].fwd = torch.relu") + (
            "\nclass Other(nn.Module):\n    def append(self, m):\n        return m\n")
        self.expect(appended, "attribute_assignment")
        class_attr = native() + "\nclass Holder:\n    e = ext\nHolder.e.fwd = torch.relu\n"
        self.expect(class_attr, "attribute_assignment")
        self.expect(py(top="op = torch.ops.aten._softmax._op"), "private_name")
        self.expect(py(top="k = torch.ops.aten.relu.default.py_impl"), "custom_op_registration")
        # Storing, calling, launching and reading them is how they are used.
        ok = native().replace("super().__init__()", "super().__init__()\n        self.ext = ext\n"
                              "        self.fn = self.ext.fwd\n        self.has = hasattr(ext, \"fwd\")")
        res = kr.check(ok)
        self.assertTrue(res["ok"], res["violations"])
        ok_kernel = "import triton\nimport triton.language as tl\n" + py(
            top="@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n"
                "def launch(kern, v):\n    kern[(1,)](v, 1, BLOCK=128)\nlaunch(_k, torch.zeros(1))\n"
                "class Runner(nn.Module):\n    def run(self, kern, v):\n        kern[(1,)](v, 1, BLOCK=128)\n"
                "    def forward(self, v):\n        self.run(_k, v)\n        return v\n"
                "ok = isinstance(torch.zeros(1), (torch.Tensor, nn.Parameter))\n"
                "def typed(v: torch.Tensor) -> torch.Tensor:\n    return v")
        res = kr.check(ok_kernel)
        self.assertTrue(res["ok"], res["violations"])

    def test_module_escape(self):
        self.expect(py(top="mods = [torch]"), "module_as_value")
        self.expect(py(top="c = torch.cuda\ns = c.Stream()"), "module_as_value")
        self.expect(py(top="import torch.nn.functional as F\nt = F.torch.load"), "banned_module")

    def test_threads_processes(self):
        self.expect(py(top="import threading"), "import_not_allowed")
        self.expect(py(top="import torch.multiprocessing as mp"), "import_not_allowed")
        self.expect(py(top="p = torch.multiprocessing.Process"), "threads_processes")

    def test_files_and_network(self):
        self.expect(py(top='d = open("/etc/passwd").read()'), "banned_builtin")
        self.expect(py(top='w = torch.hub.load_state_dict_from_url("http://x")'), "file_os_network")
        self.expect(py(top='t = torch.from_file("/etc/passwd")'), "file_os_network")
        self.expect(py(top="import numpy as np\na = np.load('x.npy')"), "file_os_network")
        self.expect(py(body="x.numpy().tofile('x')"), "file_os_network")

    def test_seeding(self):
        self.expect(py(top="import numpy as np\nnp.random.seed(0)"), "seeding")
        self.expect(py(top="torch.random.manual_seed(0)"), "seeding")
        self.expect(py(top="s = torch.get_rng_state()"), "seeding")

    def test_load_inline_dynamic_forms(self):
        dyn = [
            native(pre="import math\n", args='name="ext", cpp_sources=str(math.pi), functions=["fwd"]'),
            native(pre="parts = [src]\nparts.append('x')\n", args='name="ext", cpp_sources=parts, functions=["fwd"]'),
            native(pre="S = 'a'\nS = 'b'\n", args='name="ext", cpp_sources=S, functions=["fwd"]'),
            native(args='name="ext", cpp_sources=src, functions=FUNCS'),
            native(args="**{'name': 'ext'}"),
        ]
        for src in dyn:
            with self.subTest(src=src[-120:]):
                self.expect(src, "load_inline_dynamic")
        self.expect(native(args=DEFAULT_ARGS + ', extra_include_paths=["/etc"]'), "load_inline_argument")
        self.expect(native(args='name="ext", cpp_sources=src'), "load_inline_argument")
        self.expect(native(args='name="bad name", cpp_sources=src, functions=["fwd"]'), "load_inline_argument")

    def test_load_inline_resolution_output(self):
        res = kr.check(native(pre='N = 256\nOPT = "-O" + "3"\n',
                              args=f'name="ext", cpp_sources=[src, f"// {{N}}"], functions=("fwd",), '
                                   'extra_cflags=[OPT, "-DN={}".format(N)]'))
        self.assertTrue(res["ok"], res["violations"])
        (li,) = res["load_inline"]
        self.assertEqual(li["name"], "ext")
        self.assertEqual(li["functions"], ["fwd"])
        self.assertEqual(li["extra_cflags"], ["-O3", "-DN=256"])
        self.assertEqual(li["cpp_sources"][1], "// 256")
        self.assertFalse(li["with_cuda"])
        self.assertEqual(res["entry_points"], ["fwd"])
        self.assertEqual(res["language"], "cpp")

    def test_forbidden_flags(self):
        for bad in (["-Wl,-rpath,/tmp"], ["-fplugin=x.so"], ["-B/tmp"], ["-specs=x"], ["-lfoo"], ["-L/tmp"],
                    ["-include", "x.h"], ["-imacros", "x"], ["-I/etc"], ["-x", "c"], ["-o", "x"], ["@file"],
                    ["-fopenmp"], ["-O3 -fplugin=x.so"], ["-Xcompiler", "-fopenmp"], ["-DX=fopen"]):
            with self.subTest(flags=bad):
                res = kr.check(flags(cflags=bad))
                self.assertFalse(res["ok"])
        self.expect(flags(ldflags=["-lcuda"]), "compiler_flag")
        # KernelBench's example passes empty strings; they are dropped, not refused.
        res = kr.check(flags(cflags=[""], ldflags=[""]))
        self.assertTrue(res["ok"], res["violations"])
        self.assertEqual(res["load_inline"][0]["extra_ldflags"], [])
        self.expect(flags(cuda=["--use_fast_math"]), "fast_math_strict")

    def test_native_hacks(self):
        cases = {
            "native_file_io": 'void f() { FILE* fp = fopen("/etc/passwd", "r"); fclose(fp); }',
            "native_macro": '#define CAT(a,b) a%:%:b\nvoid g() { CAT(fo,pen)("x","r"); }',
            "native_syscall": 'typedef void* (*fn)(const char*, const char*);\n'
                              'void f() { fn p = (fn)dlsym(RTLD_DEFAULT, "fopen"); }',
            "native_asm": 'void f() { __asm__ __volatile__("syscall"); }',
            "native_include": '#include "../../../../etc/passwd"',
            "native_stream_event_graph": "void f() { auto s = c10::cuda::getStreamFromPool(); }",
            "native_python_api": 'namespace py = pybind11;\nvoid f(py::object o) {}',
            "native_getenv": "extern char** environ;",
            "native_thread": "#pragma omp parallel for\nvoid f() {}",
            "native_custom_op": "__attribute__((constructor)) void init() {}",
        }
        for rule, code in cases.items():
            with self.subTest(rule=rule):
                self.expect(native(code), rule)
        # CUB's device-wide layer loads the driver API: refused with a hint.
        res = kr.check(native("#include <cub/cub.cuh>"))
        self.assertIn("native_include", rules_of(res))
        self.assertIn("cub/block/", res["violations"][0]["message"])
        self.expect(native("#include <cub/device/device_reduce.cuh>"), "native_include")
        self.expect(native("#include <thread>"), "native_include")
        self.expect(native("#include <unistd.h>"), "native_include")
        self.expect(native("#include <cstdio>\nvoid f() { FILE* f = fdopen(3, \"w\"); }"), "native_file_io")
        self.expect(native("#include <iostream>\nvoid f() { int v; std::cin >> v; }"), "native_file_io")
        # A line splice inside an identifier is joined before checking.
        self.expect(native('void f() { fo\\\npen("x", "r"); }'), "native_file_io")
        self.expect(native("void f() { \\u0066open(0, 0); }"), "native_macro")
        self.expect(native("??=define X 1"), "native_macro")

    def test_native_lexer_literals(self):
        ok = native('const char* a = R"x(fopen(" )" system())x";\n'
                    "const char* b = u8\"dlsym\"; char c = '\\\"'; int d = 0x1'0;\n"
                    "/* popen\n   still a comment */ int e = 1;")
        self.assertTrue(kr.check(ok)["ok"], kr.check(ok)["violations"])


class HeldOutStyleTest(RuleAsserts):
    """Constructs that public, correct KernelBench solutions use and the
    rules once refused (42 public ModelNew files linted, stop 30; 11 false
    rejections in 5 files), each next to the threat its rule still stops."""

    def test_base_class_never_imported_is_named(self):
        # A published level-2 solution defines ModelNew(nn.Module) without
        # importing nn: still a violation, and the message says why.
        v = kr.check("import torch\nclass ModelNew(nn.Module):\n    pass\n")["violations"]
        self.assertEqual([x["rule"] for x in v], ["class_base"])
        self.assertIn("`nn` is never imported or defined in this file (import torch.nn as nn)",
                      v[0]["message"])

    def test_pybind_argument_casters(self):
        # A published conv2d (Kernel-Coder, level 1 task 80) takes
        # std::tuple<int, int> stride: pybind11's tuple caster imports
        # PySequence_GetItem, which the Tensor-only glue probe does not. What a
        # tuple/vector/IntArrayRef/double/bool/int64 signature imported beyond
        # the probe, measured with torch 2.11 (docs/rules.md):
        casters = ["PyFloat_AsDouble", "PyFloat_Type", "PyIndex_Check", "PyList_New", "PyLong_AsLong",
                   "PyNumber_Check", "PyNumber_Float", "PyNumber_Long", "PySequence_Check",
                   "PySequence_GetItem", "PySequence_Size",
                   "_ZN8pybind116detail11type_casterIN3c108ArrayRefIlEEvE4loadENS_6handleEb"]
        self.assertEqual(kr.check_symbols(casters), [])
        # still refused: what runs, imports or evaluates Python from native code
        for sym in ("PyRun_SimpleString", "PyImport_ImportModule", "Py_CompileString",
                    "PyEval_EvalCode", "PyObject_CallFunction", "PySys_SetObject"):
            self.assertEqual([v["rule"] for v in kr.check_symbols([sym])], ["native_symbol"], sym)

    def test_exit_on_an_error_path(self):
        # Published CUDA solutions end a failed launch with exit(); 7 of the
        # 23 CUDA candidates of the domain corpus import `exit` from their
        # CUDA object on the H200 (scripts/gpu/symbol_census.py, stop 31). A
        # runner that exits is already an error verdict: allowed.
        check = ("#define CUDA_CHECK(e) do { cudaError_t r = (e); if (r != cudaSuccess) { "
                 "printf(\"%s\\n\", cudaGetErrorString(r)); exit(EXIT_FAILURE); } } while (0)\n"
                 "void launch() { CUDA_CHECK(cudaGetLastError()); std::exit(1); _exit(2); }")
        self.ok(native(check))
        self.assertEqual(kr.check_symbols(["exit", "_exit", "_Exit", "quick_exit", "abort"]), [])
        # still refused: what can change a measurement or an output
        self.expect(native("void f() { system(\"true\"); }"), "native_syscall")
        self.expect(native("void f() { fork(); }"), "native_syscall")
        self.expect(native("void f() { atexit(nullptr); }"), "native_syscall")
        for sym in ("system", "fork", "dlopen", "setenv", "clock_gettime", "cudaStreamCreate",
                    "cudaGraphLaunch", "pthread_create", "fopen"):
            self.assertEqual([v["rule"] for v in kr.check_symbols([sym])], ["native_symbol"], sym)

    def test_triton_combine_function(self):
        # tl.associative_scan / tl.reduce take a @triton.jit combine function
        # (Triton's documented API; refused until the domain corpus, stop 31).
        kernel = ("import triton\nimport triton.language as tl\n\n"
                  "@triton.jit\ndef _mul(a, b):\n    return a * b\n\n"
                  "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
                  "    offs = tl.arange(0, BLOCK)\n"
                  "    v = tl.load(x_ptr + offs, mask=offs < n, other=1.0)\n"
                  "    p = {call}\n"
                  "    tl.store(y_ptr + offs, p, mask=offs < n)\n")
        body = "y = torch.empty_like(x)\nk[(1,)](x, y, x.numel(), BLOCK=1024)\nreturn y"
        for call in ("tl.associative_scan(v, 0, _mul)", "tl.reduce(v, 0, _mul)",
                     "tl.associative_scan(v, axis=0, combine_fn=_mul)"):
            self.ok(py(top=kernel.format(call=call), body=body))
        # still refused: the kernel handed around as a Python value
        self.expect(py(top=kernel.format(call="tl.associative_scan(v, 0, _mul)") + "\nleak = [_mul]\n",
                       body=body), "attribute_assignment")

    def test_debug_info_flags(self):
        self.ok(flags(cflags=["-O3", "-g"], cuda=["-O3", "-g", "-lineinfo"], ldflags=["-g", "-O2"]))
        self.expect(flags(ldflags=["-g", "-Wl,-rpath,/tmp"]), "compiler_flag")
        self.expect(flags(ldflags=["-L/tmp"]), "compiler_flag")
        self.expect(flags(cflags=["-gsplit-dwarf=/tmp/x"]), "compiler_flag")

    def test_model_new_bound_to_itself(self):
        self.ok(py() + "\n\nModelNew = ModelNew\n")
        # still refused: bound again to something else, or before the class exists
        self.expect(py(top="class Other(nn.Module):\n    pass") + "\n\nModelNew = Other\n", "missing_model_new")
        self.expect(py(top="ModelNew = ModelNew"), "missing_model_new")

    def test_dtype_comparisons_are_not_casts(self):
        self.ok(py(body="if x.dtype in (torch.float16, torch.bfloat16):\n    raise TypeError('fp32 only')\n"
                        "use_tc = x.dtype == torch.half or x.dtype is torch.bfloat16\n"
                        "fast = [x.dtype] != [torch.float16]"))
        self.expect(py(body="x = x.to(torch.float16)"), "precision_downgrade")
        self.expect(py(top="LOW = torch.float16"), "precision_downgrade")
        self.expect(py(body="ok = x.half() == x"), "precision_downgrade")
        self.expect(py(body="x = x.to(torch.bfloat16 if x.dtype == torch.float32 else x.dtype)"),
                    "precision_downgrade")

    def test_unreferenced_copy_of_get_inputs(self):
        copied = ("def get_inputs():\n    return [torch.randn(4, 8, dtype=torch.bfloat16)]\n"
                  "def get_init_inputs():\n    return [torch.float16]")
        self.ok(py(top=copied))
        # refused once anything can run it: called from the model, decorated, or named
        self.expect(py(top=copied, body="x = get_inputs()[0]"), "precision_downgrade")
        self.expect(py(top="@functools.lru_cache(None)\n" + copied), "precision_downgrade")
        self.expect(py(top=copied + '\nf = getattr(ModelNew, "get_inputs", None)'), "precision_downgrade")
        # any module-level function nothing names is as dead, whatever its name
        self.ok(py(top=copied.replace("def get_inputs", "def make_inputs")))
        self.expect(py(top=copied.replace("def get_inputs():", "def get_inputs(d=torch.float16):")),
                    "precision_downgrade")  # a default runs at definition
        self.ok(py(top="def bench(m):\n    import time\n    torch.manual_seed(0)\n    return time.time()\n"
                       "def unused():\n    return bench(None)"))  # dead, and so is what only it names
        self.expect(py(top="def bench(m):\n    import time\n    return time.time()\nB = bench"),
                    "import_not_allowed")
        self.expect(py(top="def __getattr__(name):\n    import os\n    return os"), "import_not_allowed")

    def test_missing_functions_hides_no_other_finding(self):
        src = native("PYBIND11_MODULE(ext, m) { m.def(\"fwd\", &fwd); }",
                     args='name="ext", cpp_sources=src, extra_cflags=["-ffast-math"]')
        res = kr.check(src)
        self.assertFalse(res["ok"])
        self.assertEqual({"load_inline_argument", "native_python_api", "fast_math_strict"},
                         {v["rule"] for v in res["violations"]} & {"load_inline_argument", "native_python_api",
                                                                     "fast_math_strict"}, res["violations"])
        self.assertEqual(res["load_inline"], [])  # nothing to build

    def test_lcudart(self):
        self.ok(flags(ldflags=["-lcudart", "-lcublas"]))
        self.expect(flags(ldflags=["-lcudart", "-lcuda_fake"]), "compiler_flag")

    def test_main_block_never_runs(self):
        main = ('if __name__ == "__main__":\n    import time\n    torch.manual_seed(0)\n'
                '    m = ModelNew().half()\n    t = time.time()\n')
        self.ok(py() + "\n" + main)
        # the else branch runs, and so does any block once `__name__` is rebound
        self.expect(py() + "\n" + 'if __name__ == "__main__":\n    pass\nelse:\n    torch.manual_seed(0)\n',
                    "seeding")
        self.expect(py() + '\n__name__ = "__main__"\n' + main, "seeding")
        self.expect(py() + '\nfor __name__ in ["__main__"]:\n    pass\n' + main, "seeding")
        self.expect(py() + "\n" + main.replace('__name__ == "__main__"', '__name__ != "__main__"'), "seeding")
        self.expect(py(body="if __name__ == '__main__':\n    torch.manual_seed(0)"), "seeding")  # not module level

    def test_low_dtype_branches(self):
        self.ok(py(body="if x.dtype == torch.float16:\n    out_dtype = torch.float16\n"
                        "elif x.dtype in (torch.bfloat16,):\n    out_dtype = torch.bfloat16\n"
                        "else:\n    out_dtype = torch.float32"))
        self.expect(py(body="if x.dtype == torch.float32:\n    x = x.half()"), "precision_downgrade")
        self.expect(py(body="if x.dtype == torch.float16:\n    pass\nelse:\n    x = x.half()"), "precision_downgrade")
        self.expect(py(body="if x.dtype in (torch.float16, torch.float32):\n    x = x.half()"), "precision_downgrade")

    def test_private_generator(self):
        self.ok(py(init="g = torch.Generator().manual_seed(1234)\n"
                        "self.w = nn.Parameter(torch.randn(4, 4, generator=g))\n"
                        "h = torch.Generator(device='cpu')"))
        self.expect(py(top="torch.manual_seed(0)"), "seeding")
        self.expect(py(init="g = torch.Generator()\ng.manual_seed(1)"), "seeding")  # only the chained form
        self.expect(py(init="s = torch.default_generator.manual_seed(1)"), "seeding")
        self.expect(py(init="torch.cuda.manual_seed_all(1)"), "seeding")

    def test_copy_of_the_reference_class(self):
        # The task is loaded as its own module in its own process: a
        # candidate's `Model` cannot stand in for it.
        self.ok(py(top="class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
                       "Model = nn.Identity"))

    def test_linear_init_helper(self):
        self.ok(py(init="w = nn.Parameter(torch.empty(4, 4))\n"
                        "fan_in, _ = nn.init._calculate_fan_in_and_fan_out(w)\n"
                        "g = torch.nn.init._calculate_correct_fan(w, 'fan_in')"))
        self.expect(py(init="nn.init._no_grad_uniform_(torch.empty(4), 0, 1)"), "private_name")
        self.expect(py(top="f = nn.init._calculate_fan_in_and_fan_out.__globals__"), "interpreter_internals")


class SymbolTest(unittest.TestCase):
    TYPICAL = [
        "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
        "_ZN2at4_ops10empty_like4callERKNS_6TensorEN3c108optionalINS5_10ScalarTypeEEE",
        "_ZNK2at10TensorBase8data_ptrIfEEPT_v", "_ZN5torch8autograd12AutogradMetaE",
        "_ZTVN5torch8autograd12AutogradMetaE", "_ZN6caffe28TypeMeta26error_unsupported_typemetaES0_",
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE6appendEPKc@GLIBCXX_3.4.21",
        "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
        "_ZNSt8ios_base4InitC1Ev", "_ZSt20__throw_length_errorPKc", "_ZNSolsEi", "_ZNSaIcEC1Ev",
        "_ZTISt9exception", "_ZTVN10__cxxabiv117__class_type_infoE", "_ZTIPKc",
        "_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc", "_ZSt11_Hash_bytesPKvmm",
        "_ZNKSt8__detail20_Prime_rehash_policy14_M_need_rehashEmmm",
        "_Znwm", "_ZdlPvm", "__cxa_throw", "__cxa_atexit", "__gxx_personality_v0", "_Unwind_Resume",
        "__stack_chk_fail", "__assert_fail", "memcpy", "memset", "strlen", "expf", "tanhf", "sqrt",
        "__gmon_start__", "_ITM_registerTMCloneTable", "__tls_get_addr", "__libc_single_threaded",
        "cudaLaunchKernel", "__cudaRegisterFatBinary", "__cudaPushCallConfiguration",
        "__cudaPopCallConfiguration", "cudaGetLastError", "cudaGetErrorString",
        "_ZN3c104cuda20getCurrentCUDAStreamEa",
        # printing to stdout/stderr, as Python's print may
        "printf", "puts", "putchar", "__printf_chk", "fprintf", "__fprintf_chk", "fflush", "fwrite",
        "stdout", "stderr", "_ZSt4cout", "_ZSt4cerr", "_ZSt4endlIcSt11char_traitsIcEERSt13basic_ostreamIT_T0_ES6_",
        # cuBLAS compute
        "cublasCreate_v2", "cublasDestroy_v2", "cublasSgemm_v2", "cublasSgemmStridedBatched",
        "cublasGemmEx", "cublasLtMatmul",
    ]

    def test_typical_extension_passes(self):
        self.assertEqual(kr.check_symbols(self.TYPICAL), [])

    def test_dangerous_symbols_rejected(self):
        for sym in ("fopen", "fopen64@GLIBC_2.2.5", "open", "syscall", "dlsym", "dlopen", "getenv", "system",
                    "pthread_create", "fork", "mmap", "write", "read", "socket", "execve", "popen",
                    "cudaStreamCreate", "cudaEventCreate", "cudaGraphLaunch", "cuLaunchKernel",
                    "_ZNSt14basic_ifstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode",
                    "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
                    "_ZNSt10filesystem6removeERKNS_7__cxx114pathE", "_ZSt3cin",
                    "cublasSetStream_v2", "cublasLoggerConfigure", "curandCreateGenerator", "fopen64",
                    "_ZN5torch7Library4_defEON3c1014FunctionSchemaEPNS_11OperatorDefE",
                    "_ZN3c105utils7get_envEPKc", "_ZN2at15set_num_threadsEi",
                    "_ZN3c104cuda17getStreamFromPoolEba", "_ZN2at7Context18setAllowTF32CuBLASEb",
                    "PyRun_SimpleString", "_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb"):
            with self.subTest(sym=sym):
                v = kr.check_symbols([sym])
                self.assertEqual(len(v), 1)
                self.assertEqual(v[0]["rule"], "native_symbol")

    def test_allow_extra(self):
        glue = ["PyRun_SimpleString", "_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb"]
        self.assertEqual(kr.check_symbols(glue, allow_extra=glue), [])

    def test_elf_reader_on_real_libraries(self):
        libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
        if not os.path.exists(libc):
            self.skipTest("no libc here")
        # libc itself imports a few loader symbols and needs ld.so.
        self.assertIn("ld-linux-x86-64.so.2", kr.needed_libraries(libc))
        self.assertIsInstance(kr.undefined_symbols(libc), list)

    def test_elf_reader_matches_compiler_output(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as d:
            c = pathlib.Path(d, "x.c")
            c.write_text('#include <stdio.h>\n#include <stdlib.h>\n#include <math.h>\n'
                         'double f(double x) { FILE* p = fopen("x", "r"); return exp(x) + (p != 0) + (getenv("A") != 0); }\n')
            so = pathlib.Path(d, "x.so")
            subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(c), "-lm"], check=True)
            syms = kr.undefined_symbols(str(so))
            for s in ("fopen", "exp", "getenv"):
                self.assertIn(s, syms)
            self.assertNotIn("f", syms)
            bad = {v["message"].split(": ")[1].split(" ")[0] for v in kr.check_symbols(syms)}
            self.assertEqual(bad & {"fopen", "getenv"}, {"fopen", "getenv"})
            self.assertNotIn("exp", bad)

    def test_object_files(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as d:
            a, b = pathlib.Path(d, "a.c"), pathlib.Path(d, "b.c")
            a.write_text("int helper(int);\nint api(int x) { return helper(x) + 1; }\n")
            b.write_text("#include <stdlib.h>\nint helper(int x) { return x + (getenv(\"A\") != 0); }\n")
            for c in (a, b):
                subprocess.run([cc, "-c", "-fPIC", "-O1", "-o", str(c.with_suffix(".o")), str(c)], check=True)
            self.assertIn("helper", kr.undefined_symbols(str(a.with_suffix(".o"))))
            syms = kr.undefined_symbols_of_objects([str(a.with_suffix(".o")), str(b.with_suffix(".o"))])
            self.assertEqual(syms, ["getenv"])
            with self.assertRaises(kr.ElfError):
                kr.undefined_symbols_of_objects([str(a)])

    def test_iostream_objects_pass_even_with_static_libstdcxx(self):
        """printf and std::cout in a candidate import only allowed symbols. On a
        toolchain that links libstdc++ statically (the H200 image's does), the
        final .so also imports libstdc++'s own stdio (fopen64, read, write):
        checking the candidate's objects (undefined_symbols_of_objects) keeps
        that from being the reason a correct kernel fails."""
        cxx = shutil.which("g++") or shutil.which("c++")
        if not cxx:
            self.skipTest("no C++ compiler")
        with tempfile.TemporaryDirectory() as d:
            src = pathlib.Path(d, "k.cpp")
            src.write_text('#include <cstdio>\n#include <iostream>\n'
                           'float scale(float x, int n) {\n'
                           '  printf("n=%d\\n", n); fprintf(stderr, "x=%f\\n", x); fflush(stdout);\n'
                           '  std::cout << "scale " << x << std::endl; std::cerr << n << "\\n";\n'
                           '  return x * n;\n}\n')
            obj = pathlib.Path(d, "k.o")
            subprocess.run([cxx, "-c", "-fPIC", "-O2", "-o", str(obj), str(src)], check=True)
            self.assertEqual(kr.check_symbols(kr.undefined_symbols_of_objects([str(obj)])), [])
            so = pathlib.Path(d, "k.so")
            subprocess.run([cxx, "-shared", "-fPIC", "-o", str(so), str(obj)], check=True)
            self.assertEqual(kr.check_symbols(kr.undefined_symbols(str(so))), [])
            # With libstdc++ linked in statically, the same library imports
            # libc's locale and stdio internals: only the objects are the
            # candidate's.
            static_so = pathlib.Path(d, "k_static.so")
            if subprocess.run([cxx, "-shared", "-fPIC", "-static-libstdc++", "-o", str(static_so), str(obj)],
                              capture_output=True).returncode == 0:
                self.assertNotEqual(kr.check_symbols(kr.undefined_symbols(str(static_so))), [])

    def test_not_elf(self):
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(b"not an elf")
            f.flush()
            with self.assertRaises(kr.ElfError):
                kr.undefined_symbols(f.name)


def corpus_files(sub):
    return sorted((CORPUS / sub).glob("*.py"))


def header(path, key):
    for line in path.read_text(encoding="utf-8").splitlines()[:15]:
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return None


class CorpusTest(unittest.TestCase):
    def test_good_candidates_pass(self):
        files = corpus_files("good")
        self.assertGreaterEqual(len(files), 8)
        for path in files:
            with self.subTest(file=path.name):
                self.assertIsNotNone(header(path, "task"), "missing '# task:' header")
                res = kr.check(path.read_text(encoding="utf-8"))
                self.assertTrue(res["ok"], res["violations"])

    def test_rule_violation_hacks_rejected(self):
        n = 0
        for path in corpus_files("hacks"):
            expect = header(path, "expect") or ""
            if not expect.startswith("rule_violation"):
                continue
            n += 1
            rule = expect.split()[1]
            with self.subTest(file=path.name):
                self.assertIn(rule, kr.RULES_BY_ID)
                self.assertIsNotNone(header(path, "task"), "missing '# task:' header")
                res = kr.check(path.read_text(encoding="utf-8"))
                if rule == "native_symbol":
                    # Decided after compiling: the static rules pass it (the
                    # imported symbol is its only sign), the allowlist refuses
                    # the symbol its header names.
                    self.assertTrue(res["ok"], res["violations"])
                    sym = header(path, "symbol")
                    self.assertIsNotNone(sym, "missing '# symbol:' header")
                    self.assertEqual([v["rule"] for v in kr.check_symbols([sym])], ["native_symbol"])
                    continue
                self.assertFalse(res["ok"])
                self.assertIn(rule, rules_of(res), res["violations"])
        self.assertGreaterEqual(n, 20)

    def test_gpu_corpus_keeps_the_rules_honest(self):
        """The GPU corpus (tests/evaluator/corpus/gpu, run on a GPU by
        scripts/gpu/suite.sh corpus): its correct candidates pass the rules,
        hacks the rules must stop name their rule, and hacks left to the
        judge (cached results, freed memory, decoys, crashes) pass the
        rules, so the GPU run really exercises the judge."""
        import json
        gpu = CORPUS / "gpu"
        entries = []
        for name in ("manifest.json", "manifest_large.json", "manifest_domain.json"):
            if (gpu / name).is_file():
                entries += json.loads((gpu / name).read_text())
        self.assertGreaterEqual(len(entries), 70)
        for e in entries:
            with self.subTest(file=e["file"]):
                res = kr.check((gpu / e["file"]).read_text(encoding="utf-8"))
                expect = e["expect"].split("|")
                if e.get("rules"):
                    self.assertFalse(res["ok"])
                    for rule in e["rules"]:
                        self.assertIn(rule, rules_of(res), res["violations"])
                elif "rule_violation" not in expect:
                    self.assertTrue(res["ok"], res["violations"])

    def test_realistic_candidates_pass(self):
        """Correct solutions in the styles models write for KernelBench
        (levels 1-3): none may be rejected by the rules."""
        files = corpus_files("realistic")
        self.assertGreaterEqual(len(files), 60)
        rejected = []
        for path in files:
            with self.subTest(file=path.name):
                task = header(path, "task")
                self.assertIsNotNone(task, "missing '# task: levelN/<problem>' header")
                self.assertRegex(task, r"^level[1-3]/\d+_\w+$")
                if KERNELBENCH.is_dir():
                    self.assertTrue((KERNELBENCH / f"{task}.py").is_file(), task)
                tolerance = header(path, "tolerance") or "strict"
                res = kr.check(path.read_text(encoding="utf-8"), tolerance=tolerance)
                if not res["ok"]:
                    rejected.append(path.name)
                self.assertTrue(res["ok"], res["violations"])
        self.assertEqual(rejected, [])

    def test_realistic_corpus_covers_the_styles(self):
        """Each false-positive class the rules once had is represented."""
        texts = {p.name: p.read_text(encoding="utf-8") for p in corpus_files("realistic")}
        styles = {
            "load_inline (C++/CUDA)": r"load_inline\(",
            "Triton kernel": r"@triton\.jit",
            "@triton.autotune": r"@triton\.autotune",
            "@triton.heuristics": r"@triton\.heuristics",
            "tl.constexpr parameter or constant": r"tl\.constexpr",
            "private kernel name": r"def _\w+_kernel\(|def _\w+\(",
            "private module-level source string": r"^_\w*(cpp|cuda)\w*\s*=",
            "private class": r"^class _\w+",
            "ResNet-style self._make_layer": r"self\._make_layer\(",
            "ModelNew alias": r"^ModelNew = \w+",
            "__main__ block": r'^if __name__ == "__main__":',
            "shadowed builtin `input`": r"def forward\(self, input",
            "shadowed builtin `vars`": r"\bvars = ",
            "shadowed builtin `type`": r"\btype=",
            "writes to a submodule's tensors": r"self\.\w+\.(weight|bias)\.data = ",
            "<cuda.h>": r"#include <cuda\.h>",
            "cuBLAS": r"#include <cublas_v2\.h>",
            "math constants": r"#include <math_constants\.h>",
            "CUB block primitives": r"#include <cub/block/",
            "host-side stream output": r"std::cerr|printf\(",
            "-lcublas": r'"-lcublas"',
            "tolerance tf32 header": r"^# tolerance: tf32",
            "library class as a default value": r"act_layer=nn\.\w+",
            "debug-info flags": r'extra_ldflags=\["-g"\]',
            "a dtype compared, not cast": r"dtype (in|!=|==) \(?torch\.(float16|bfloat16|float32)",
            "nn.Linear's init helper": r"nn\.init\._calculate_fan_in_and_fan_out\(",
            "ModelNew bound to itself": r"^ModelNew = ModelNew$",
        }
        for style, pattern in styles.items():
            with self.subTest(style=style):
                hits = [n for n, t in texts.items() if re.search(pattern, t, re.M)]
                self.assertTrue(hits, f"no realistic file shows {style} ({pattern})")
        for level in ("level1/", "level2/", "level3/"):
            n = sum(1 for t in texts.values() if f"# task: {level}" in t)
            self.assertGreaterEqual(n, 8, level)

    def test_cli_on_corpus_file(self):
        path = corpus_files("good")[0]
        proc = subprocess.run([sys.executable, str(REPO / "evaluator/rules/korch_rules.py"), str(path)],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
