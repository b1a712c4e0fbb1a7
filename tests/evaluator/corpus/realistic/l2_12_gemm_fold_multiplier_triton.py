# task: level2/12_Gemm_Multiply_LeakyReLU
# style: Triton; constant folding in __init__ via self.gemm.weight.data = ... / self.gemm.bias.data = ...; fused LeakyReLU
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _leaky_relu_kernel(x_ptr, y_ptr, n, slope, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x >= 0, x, x * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope
        # (W x + b) * m == (m W) x + m b: fold the multiplier into the layer once.
        with torch.no_grad():
            self.gemm.weight.data = self.gemm.weight.data * multiplier
            self.gemm.bias.data = self.gemm.bias.data * multiplier

    def forward(self, x):
        y = self.gemm(x)
        out = torch.empty_like(y)
        n = y.numel()
        _leaky_relu_kernel[(triton.cdiv(n, 1024),)](y, out, n, self.negative_slope, BLOCK=1024)
        return out
