# task: any ReLU task (examples/tasks/5_ReLU_medium.py)
# Equal work by another road (issue #49, stop 57): the reference's own
# torch.relu, then a load_inline function that returns its argument. Its only
# extra work is the call path -- the module attribute, pybind11, the
# extension's code -- about 0.2-0.3 us in a loop. At 1024x1024 (~0.35 ms a
# call) korch read it 0.987 [0.977, 0.997], as it read relu_at (at::relu
# inside the extension) 0.987 in the same minutes: the ~1% that korch reads
# equal work low at ~1 ms is the candidate's longer call path paying cold
# caches after the runner's own work between calls, not the op.
#
#   korch-bench-eval --task examples/tasks/5_ReLU_medium.py \
#       --code tools/bench/candidates/relu_ident.py --mode submit --print
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor ident(const torch::Tensor& x) {
    return x;
}
"""

ext = load_inline("korch_equal_work_ident", SRC, functions=["ident"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.ident(torch.relu(x))
