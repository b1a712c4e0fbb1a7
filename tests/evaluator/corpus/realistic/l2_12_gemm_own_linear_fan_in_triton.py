# task: level2/12_Gemm_Multiply_LeakyReLU
# style: Triton; the candidate's own weight/bias Parameters initialised like nn.Linear (kaiming_uniform_ + nn.init._calculate_fan_in_and_fan_out); a dtype test `x.dtype in (torch.float16, torch.bfloat16)`
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_leaky_relu_kernel(y_ptr, out_ptr, n, multiplier, slope, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y_ptr + offs, mask=mask) * multiplier
    tl.store(out_ptr + offs, tl.where(v >= 0, v, v * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.multiplier = multiplier
        self.negative_slope = negative_slope
        self.reset_parameters()

    def reset_parameters(self):
        # The same draws, in the same order, as nn.Linear.reset_parameters.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            raise TypeError("fp32 kernel: got %s" % x.dtype)
        y = torch.addmm(self.bias, x, self.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        _scale_leaky_relu_kernel[(triton.cdiv(n, 1024),)](
            y, out, n, self.multiplier, self.negative_slope, BLOCK=1024)
        return out
