"""What "equal work" costs in one process, without korch's harness.

The equal-work candidate of issue #7 (tests/evaluator/corpus/equal_work/
relu_at.py) calls at::relu through a pybind11 function where the reference
calls torch.relu through torch's own Python binding. Both end in the same ATen
kernel, but the two Python-to-C++ paths cost different amounts, which matters
when the kernel itself takes a few microseconds. This script times both
forwards in one process, interleaved, batched like korch's CPU runner (the
first call of a batch untimed, the rest as one window), so that the
evaluator's figure at a size can be compared with the models' own difference.

    python3 tools/bench/binding_cost.py --so PATH/korch_equal_work_relu.so \
        [--shape 64,256] [--batch 20] [--rounds 2000]

PATH is the compiled candidate in korch's cache: after one evaluation of
relu_at.py, `find <cache> -name 'korch_equal_work_relu*.so'`.
"""
import argparse
import importlib.machinery
import importlib.util
import statistics
import time

import torch


def load(path):
    name = "korch_equal_work_relu"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", required=True)
    ap.add_argument("--shape", default="64,256")
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ext = load(a.so)

    class Ref(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    class Cand(torch.nn.Module):
        def forward(self, x):
            return ext.relu_same(x)

    ref, cand = Ref(), Cand()
    shape = [int(s) for s in a.shape.split(",")]
    xs = [torch.randn(*shape) for _ in range(a.batch)]

    def window(model):
        out = [model(xs[0])]
        t0 = time.perf_counter_ns()
        for x in xs[1:]:
            out.append(model(x))
        return (time.perf_counter_ns() - t0) / (len(xs) - 1)

    print("shape %s, batch %d, %d rounds, torch %s" % (shape, a.batch, a.rounds, torch.__version__))
    for rep in range(a.repeat):
        r, c = [], []
        for _ in range(a.rounds):
            r.append(window(ref))
            c.append(window(cand))
        mr, mc = statistics.median(r), statistics.median(c)
        print("repeat %d: torch.relu %.3f us  pybind11 at::relu %.3f us  ratio (ref/cand) %.3f"
              % (rep, mr / 1e3, mc / 1e3, mr / mc))


if __name__ == "__main__":
    main()
