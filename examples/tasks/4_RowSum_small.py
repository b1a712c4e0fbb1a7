import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that sums each row of a matrix (a reduction over dim 1).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Sums the input over dimension 1.

        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, dim).

        Returns:
            torch.Tensor: Output tensor of shape (batch_size,).
        """
        return torch.sum(x, dim=1)

batch_size = 64
dim = 64

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
