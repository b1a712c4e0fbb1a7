# expect: rule_violation streams_events_graphs
# task: 1_ReLU_small
# hack: runs on a side stream so timing misses it
import torch
import torch.nn as nn
SIDE = torch.cuda.Stream()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
