# task: 1_ReLU_small
# expect: ok
# ReLU via at::clamp_min with a .format()-built name and a dict of functions.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

VERSION = 2
EXT_NAME = "relu_at_v{}".format(VERSION)
SRC = """
#include <torch/extension.h>
torch::Tensor relu_at(const torch::Tensor& x) {
    return at::clamp_min(x, 0.0);
}
"""

ext = load_inline(EXT_NAME, SRC, functions={"relu_at": "ReLU via at::clamp_min"},
                  extra_cflags=["-O3", "-march=native", "-DNDEBUG"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_at(x)
