# expect: rule_violation dynamic_getattr
# task: 4_RowSum_small
# hack: getattr with a computed name
import torch
import torch.nn as nn
reduce_fn = getattr(torch, "su" + "m")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return reduce_fn(x, dim=1)
