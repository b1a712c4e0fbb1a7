# task: any ReLU task (examples/tasks/1_ReLU_small.py, 5_ReLU_medium.py, 6_ReLU_large.py,
#       KernelBench level1/19_ReLU.py)
# expect: ok, speedup 1.00 with a 95% interval containing 1.0
# Equal work: the load_inline function calls the same ATen op as the
# reference (torch.relu -> at::relu), on the CPU and on the GPU alike. Any
# speedup other than 1.00 is the harness's bias (korch-bench-eval reports it).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor relu_same(const torch::Tensor& x) {
    return at::relu(x);
}
"""

ext = load_inline("korch_equal_work_relu", SRC, functions=["relu_same"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_same(x)
