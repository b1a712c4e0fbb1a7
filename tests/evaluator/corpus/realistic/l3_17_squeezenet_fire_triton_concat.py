# task: level3/17_SqueezeNetFireModule
# style: Triton; ReLU of both expand branches written straight into the concatenated output (no torch.cat)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0.0), 0.0), mask=mask)


@triton.jit
def _relu_concat_kernel(a_ptr, b_ptr, out_ptr, total, ca, cb, hw, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c_out = ca + cb
    n = offs // (c_out * hw)
    rem = offs % (c_out * hw)
    c = rem // hw
    p = rem % hw
    from_a = c < ca
    a_idx = (n * ca + c) * hw + p
    b_idx = (n * cb + (c - ca)) * hw + p
    va = tl.load(a_ptr + a_idx, mask=mask & from_a, other=0.0)
    vb = tl.load(b_ptr + b_idx, mask=mask & (c >= ca), other=0.0)
    v = tl.where(from_a, va, vb)
    tl.store(out_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels):
        super(ModelNew, self).__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)

    def forward(self, x):
        s = self.squeeze(x)
        s_relu = torch.empty_like(s)
        n = s.numel()
        _relu_kernel[(triton.cdiv(n, 1024),)](s, s_relu, n, BLOCK=1024)
        a = self.expand1x1(s_relu).contiguous()
        b = self.expand3x3(s_relu).contiguous()
        N, ca, H, W = a.shape
        cb = b.shape[1]
        out = torch.empty((N, ca + cb, H, W), device=a.device, dtype=a.dtype)
        total = out.numel()
        _relu_concat_kernel[(triton.cdiv(total, 1024),)](a, b, out, total, ca, cb, H * W, BLOCK=1024)
        return out
