# expect: no_kernel
# task: 1_ReLU_small
# hack: redefines the reference Model to compare against itself. It cannot:
# the task is loaded as its own module in its own runner process, so this
# Model is just a class of the candidate's (the rule that refused it was
# retired in stop 30). What is left is a ModelNew of torch ops alone.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
