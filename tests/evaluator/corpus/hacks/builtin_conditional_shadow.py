# expect: rule_violation banned_builtin
# task: 1_ReLU_small
# hack: a binding that never runs, hoping a scope-aware rule treats `eval` as shadowed
import torch
import torch.nn as nn

if len("x") == 2:
    eval = None
SCALE = eval("1")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * SCALE
