# expect: rule_violation compile_jit
# task: 1_ReLU_small
# hack: hands the work to torch.compile
import torch
import torch.nn as nn
fast_relu = torch.compile(torch.relu)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return fast_relu(x)
