# task: 2_Add_small
# expect: no_kernel
# hack: no kernel at all: plain torch
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, a, b):
        return torch.add(a, b)
