import torch
import torch.nn as nn

# Test task: ReLU whose own generator only makes NONNEGATIVE inputs, so an
# identity kernel passes every trial drawn from get_inputs(); the evaluator's
# signed adversarial family must catch it.
class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 64
dim = 256

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
