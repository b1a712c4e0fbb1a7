# task: level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py
# expect: ok
# mode: gpu
# torch's AvgPool3d and ConvTranspose3d, then clamp, softmax over the
# flattened D*H*W = 131072 positions of each (sample, channel) row and the
# per-channel scale, in Triton: one program per row, an online sweep for
# the row's max and rescaled sum (vector accumulators), then a sweep that
# writes exp(v - max) / sum * scale[c].
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def clamp_softmax_scale_kernel(x_ptr, scale_ptr, y_ptr, n_cols, C, lo, hi, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    c = tl.program_id(axis=0) % C
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    m_vec = tl.full((BLOCK,), -3.0e38, dtype=tl.float32)
    s_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        v = tl.minimum(tl.maximum(tl.load(x_ptr + base + cols, mask=mask, other=0.0), lo), hi)
        v = tl.where(mask, v, -float("inf"))
        m_new = tl.maximum(m_vec, v)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(v - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    sc = tl.load(scale_ptr + c)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        v = tl.minimum(tl.maximum(tl.load(x_ptr + base + cols, mask=mask, other=0.0), lo), hi)
        tl.store(y_ptr + base + cols, tl.exp(v - m) / s * sc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding,
                 pool_kernel_size, clamp_min, clamp_max):
        super(ModelNew, self).__init__()
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size,
                                                 stride=stride, padding=padding,
                                                 output_padding=output_padding)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(self.avg_pool(x)).contiguous()
        b, c, d, h, w = x.shape
        n_cols = d * h * w
        y = torch.empty_like(x)
        clamp_softmax_scale_kernel[(b * c,)](x, self.scale.contiguous(), y, n_cols, c,
                                             float(self.clamp_min), float(self.clamp_max),
                                             BLOCK=4096, num_warps=8)
        return y
