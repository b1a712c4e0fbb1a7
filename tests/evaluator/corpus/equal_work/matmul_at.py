# task: any square matmul task (examples/tasks/7_Matmul_medium.py,
#       KernelBench level1/1_Square_matrix_multiplication_.py)
# expect: ok, speedup 1.00 with a 95% interval containing 1.0
# Equal work: the load_inline function calls the same ATen op as the
# reference (torch.matmul -> at::matmul). At tens of ms per call the
# binding's ~0.1 us is nothing; any speedup other than 1.00 is the harness's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor matmul_same(const torch::Tensor& a, const torch::Tensor& b) {
    return at::matmul(a, b);
}
"""

ext = load_inline("korch_equal_work_matmul", SRC, functions=["matmul_same"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul_same(A, B)
