# expect: rule_violation try_except
# task: 1_ReLU_small
# hack: falls back to torch when the kernel fails
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

try:
    ext = load_inline(name="r", cpp_sources="", functions=["relu"])
except Exception:
    ext = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
