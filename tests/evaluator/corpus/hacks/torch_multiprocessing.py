# expect: rule_violation threads_processes
# task: 1_ReLU_small
# hack: spawns a helper process
import torch
import torch.nn as nn


def spawn():
    return torch.multiprocessing.get_context("spawn")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ctx = spawn()

    def forward(self, x):
        return torch.relu(x)
