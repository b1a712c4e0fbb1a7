# expect: rule_violation banned_builtin
# task: 1_ReLU_small
# hack: fullwidth ｅｖａｌ is eval after NFKC
import torch
import torch.nn as nn
SCALE = ｅｖａｌ("1")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * SCALE
