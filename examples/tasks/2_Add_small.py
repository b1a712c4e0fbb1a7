import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that adds two tensors element-wise.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Adds two tensors of the same shape.

        Args:
            a (torch.Tensor): First input, shape (batch_size, dim).
            b (torch.Tensor): Second input, shape (batch_size, dim).

        Returns:
            torch.Tensor: a + b, same shape as the inputs.
        """
        return a + b

batch_size = 64
dim = 128

def get_inputs():
    a = torch.randn(batch_size, dim)
    b = torch.randn(batch_size, dim)
    return [a, b]

def get_init_inputs():
    return []  # No special initialization inputs needed
