# expect: rule_violation load_inline_dynamic
# task: 1_ReLU_small
# hack: sources decided at run time
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

parts = ["#include <torch/extension.h>\n"]
parts.append(chr(35) + "include <cstdio>")
ext = load_inline(name="dyn", cpp_sources=parts, functions=["relu_fwd"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_fwd(x)
