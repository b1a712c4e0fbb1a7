import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that scales its input by 2.5 and adds a bias given at
    construction time.
    """
    def __init__(self, bias: float):
        super(Model, self).__init__()
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Computes x * 2.5 + bias.

        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, dim).

        Returns:
            torch.Tensor: Output tensor, same shape as input.
        """
        return x * 2.5 + self.bias

batch_size = 32
dim = 128
bias = 0.75

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return [bias]
