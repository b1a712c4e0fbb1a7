import torch
import torch.nn as nn

# Test task: outputs are ~1e-6, far below atol=1e-4, so an all-zeros output
# passes allclose on absolute tolerance alone; the relative-norm check must
# catch it.
class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-6

batch_size = 64
dim = 256

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
