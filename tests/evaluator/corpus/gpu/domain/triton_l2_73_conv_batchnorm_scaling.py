# task: level2/73_Conv2d_BatchNorm_Scaling.py
# expect: ok
# mode: gpu
# torch's Conv2d, then training-mode BatchNorm2d and the scaling in
# Triton, on a (channel, sample) grid so that every program reads one
# contiguous H x W plane: kernel 1 writes per-plane sums, kernel 2 reduces
# a channel's plane sums to its mean and writes per-plane sums of squared
# deviations, kernel 3 reduces those to the biased variance and writes
# ((x - mean) * rstd * gamma + beta) * scaling_factor. All fp32.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _channel_total(part_ptr, c, n_samples, PBLOCK: tl.constexpr):
    idx = tl.arange(0, PBLOCK)
    acc = tl.zeros((PBLOCK,), dtype=tl.float32)
    for start in range(0, n_samples, PBLOCK):
        acc += tl.load(part_ptr + c * n_samples + start + idx, mask=start + idx < n_samples, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def plane_sum_kernel(x_ptr, psum_ptr, C, HW, BLOCK: tl.constexpr):
    c = tl.program_id(axis=0)
    n = tl.program_id(axis=1)
    N = tl.num_programs(axis=1)
    base = x_ptr + (n.to(tl.int64) * C + c) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(psum_ptr + c * N + n, tl.sum(acc, axis=0))


@triton.jit
def plane_sqdev_kernel(x_ptr, psum_ptr, psq_ptr, C, HW, inv_count, BLOCK: tl.constexpr,
                       PBLOCK: tl.constexpr):
    c = tl.program_id(axis=0)
    n = tl.program_id(axis=1)
    N = tl.num_programs(axis=1)
    mean = _channel_total(psum_ptr, c, N, PBLOCK) * inv_count
    base = x_ptr + (n.to(tl.int64) * C + c) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < HW
        d = tl.where(m, tl.load(base + offs, mask=m, other=0.0) - mean, 0.0)
        acc += d * d
    tl.store(psq_ptr + c * N + n, tl.sum(acc, axis=0))


@triton.jit
def bn_scale_apply_kernel(x_ptr, psum_ptr, psq_ptr, w_ptr, b_ptr, y_ptr, C, HW, inv_count, eps,
                          scaling, BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
    c = tl.program_id(axis=0)
    n = tl.program_id(axis=1)
    N = tl.num_programs(axis=1)
    mean = _channel_total(psum_ptr, c, N, PBLOCK) * inv_count
    var = _channel_total(psq_ptr, c, N, PBLOCK) * inv_count
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + c)
    b = tl.load(b_ptr + c)
    base = (n.to(tl.int64) * C + c) * HW
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < HW
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0)
        tl.store(y_ptr + base + offs, ((x - mean) * rstd * w + b) * scaling, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv(x).contiguous()
        N, C, H, W = x.shape
        HW = H * W
        psum = torch.empty((C, N), dtype=torch.float32, device=x.device)
        psq = torch.empty((C, N), dtype=torch.float32, device=x.device)
        y = torch.empty_like(x)
        inv_count = 1.0 / (N * HW)
        pblock = min(1024, triton.next_power_of_2(N))
        grid = (C, N)
        plane_sum_kernel[grid](x, psum, C, HW, BLOCK=2048, num_warps=8)
        plane_sqdev_kernel[grid](x, psum, psq, C, HW, inv_count, BLOCK=2048, PBLOCK=pblock,
                                 num_warps=8)
        bn_scale_apply_kernel[grid](x, psum, psq, self.bn.weight, self.bn.bias, y, C, HW, inv_count,
                                    self.bn.eps, float(self.scaling_factor), BLOCK=2048,
                                    PBLOCK=pblock, num_warps=8)
        return y
