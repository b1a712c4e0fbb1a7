# task: any ReLU task (examples/tasks/6_ReLU_large.py)
# A correct candidate that does twice the reference's memory traffic: at::relu,
# then one more in-place pass over its own output (x1.0). Memory-bound at
# 4096x4096: in one process it reads 0.66 there (equal_work_inprocess.py
# --lone, heap allocator). A benchmark input for the CPU allocator's effect on
# timing (tools/bench/README.md, issue #7 ninth pass): a timing that faults
# the output in afresh on every call adds the same ~180 ms to both sides and
# reads it near 1.0.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor relu_two_pass(const torch::Tensor& x) {
    torch::Tensor y = at::relu(x);
    y.mul_(1.0);
    return y;
}
"""

ext = load_inline("korch_bench_relu_two_pass", SRC, functions=["relu_two_pass"],
                  extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_two_pass(x)
