# task: level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py
# expect: ok
# mode: gpu
# torch's Conv2d, then sigmoid((x + bias[c]) * scale[c]) and GroupNorm
# (8 groups of 4 channels) in one Triton kernel: a program per
# (sample, group) walks the group's contiguous 4 x 254 x 254 segment three
# times (sum, squared deviations, write), recomputing the elementwise head
# each time instead of storing it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _head(x_ptr, bias_ptr, scale_ptr, seg, offs, mask, c0, HW):
    c = c0 + offs // HW
    x = tl.load(x_ptr + seg + offs, mask=mask, other=0.0)
    b = tl.load(bias_ptr + c, mask=mask, other=0.0)
    s = tl.load(scale_ptr + c, mask=mask, other=0.0)
    return tl.sigmoid((x + b) * s), c


@triton.jit
def bias_scale_sigmoid_gn_kernel(x_ptr, bias_ptr, scale_ptr, gamma_ptr, beta_ptr, out_ptr,
                                 G, CPG, HW, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    n = pid // G
    g = pid % G
    count = CPG * HW
    seg = pid.to(tl.int64) * count  # (n, g) segments are contiguous, in pid order
    c0 = g * CPG
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < count
        t, c = _head(x_ptr, bias_ptr, scale_ptr, seg, offs, mask, c0, HW)
        acc += tl.where(mask, t, 0.0)
    mean = tl.sum(acc, axis=0) / count
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < count
        t, c = _head(x_ptr, bias_ptr, scale_ptr, seg, offs, mask, c0, HW)
        d = tl.where(mask, t - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / count + eps)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < count
        t, c = _head(x_ptr, bias_ptr, scale_ptr, seg, offs, mask, c0, HW)
        gm = tl.load(gamma_ptr + c, mask=mask, other=0.0)
        bt = tl.load(beta_ptr + c, mask=mask, other=0.0)
        tl.store(out_ptr + seg + offs, (t - mean) * rstd * gm + bt, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape, scale_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x).contiguous()
        N, C, H, W = x.shape
        G = self.group_norm.num_groups
        out = torch.empty_like(x)
        bias_scale_sigmoid_gn_kernel[(N * G,)](x, self.bias.contiguous(), self.scale.contiguous(),
                                               self.group_norm.weight, self.group_norm.bias, out,
                                               G, C // G, H * W, self.group_norm.eps, BLOCK=4096,
                                               num_warps=8)
        return out
