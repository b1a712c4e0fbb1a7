# task: 3_Scale_small
# expect: ok
# Pure torch with a floor-division helper (// is an operator, not a comment).
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def chunks(n: int, size: int) -> int:
    return (n + size - 1) // size


class ModelNew(nn.Module):
    def __init__(self, bias: float):
        super().__init__()
        self.bias = bias
        self.scale = 2.5
        self.blocks = chunks(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mul(x, self.scale)
        return F.dropout(y, p=0.0, training=False) + self.bias * math.cos(0.0)
