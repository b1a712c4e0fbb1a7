# task: level2/71_Conv2d_Divide_LeakyReLU
# style: Triton; divisor folded into the conv (self.conv.weight.data / self.conv.bias.data); Triton LeakyReLU
import torch
import torch.nn as nn
import triton
import triton.language as tl

NEGATIVE_SLOPE = 0.01


@triton.jit
def leaky_relu_kernel(x_ptr, y_ptr, n, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, x, x * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.conv.weight.data = self.conv.weight.data / divisor
        self.conv.bias.data = self.conv.bias.data / divisor

    def forward(self, x):
        x = self.conv(x)
        y = torch.empty_like(x)
        n = x.numel()
        leaky_relu_kernel[(triton.cdiv(n, 2048),)](x, y, n, NEGATIVE_SLOPE, BLOCK=2048, num_warps=8)
        return y
