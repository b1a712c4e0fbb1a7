# expect: rule_violation file_os_network
# task: 1_ReLU_small
# hack: downloads weights over the network
import torch
import torch.nn as nn
W = torch.hub.load_state_dict_from_url("http://example.com/w.pt")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
