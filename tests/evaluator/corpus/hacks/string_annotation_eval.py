# expect: rule_violation string_annotation
# task: 1_ReLU_small
# hack: annotation string evaluated by get_type_hints
import torch
import torch.nn as nn


def f(v: "__import__('os').system('id')"):
    return v


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
