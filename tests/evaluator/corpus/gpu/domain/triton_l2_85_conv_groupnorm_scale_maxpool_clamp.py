# task: level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py
# expect: ok
# mode: gpu
# torch's Conv2d, then GroupNorm (16 groups of 4 channels), the
# per-channel scale, MaxPool2d(4) and clamp in Triton. Kernel 1: a program
# per (sample, group) computes the mean and rstd of its contiguous segment
# (two sweeps). Kernel 2: a program per (sample, channel, block of pooled
# pixels) transforms each of the 16 window elements (normalise, affine,
# scale - before the max, since gamma * scale may be negative), takes the
# window maximum and clamps.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_stats_kernel(x_ptr, stats_ptr, count, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    base = x_ptr + pid.to(tl.int64) * count
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < count, other=0.0)
    mean = tl.sum(acc, axis=0) / count
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < count
        d = tl.where(m, tl.load(base + offs, mask=m, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / count + eps)
    tl.store(stats_ptr + pid * 2, mean)
    tl.store(stats_ptr + pid * 2 + 1, rstd)


@triton.jit
def gn_scale_pool_clamp_kernel(x_ptr, stats_ptr, gamma_ptr, beta_ptr, scale_ptr, y_ptr,
                               C, G, H, W, OH, OW, lo, hi,
                               K: tl.constexpr, BLOCK_P: tl.constexpr):
    nc = tl.program_id(axis=0)
    pid_p = tl.program_id(axis=1)
    n = nc // C
    c = nc % C
    grp = n * G + c // (C // G)
    mean = tl.load(stats_ptr + grp * 2)
    rstd = tl.load(stats_ptr + grp * 2 + 1)
    a = rstd * tl.load(gamma_ptr + c)
    bt = tl.load(beta_ptr + c)
    sc = tl.load(scale_ptr + c)
    p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    pm = p < OH * OW
    oh = p // OW
    ow = p % OW
    plane = x_ptr + nc.to(tl.int64) * H * W
    best = tl.full((BLOCK_P,), -float("inf"), dtype=tl.float32)
    for i in tl.static_range(K * K):
        r = oh * K + i // K
        q = ow * K + i % K
        v = tl.load(plane + r * W + q, mask=pm, other=0.0)
        t = ((v - mean) * a + bt) * sc
        best = tl.maximum(best, t)
    best = tl.minimum(tl.maximum(best, lo), hi)
    tl.store(y_ptr + nc.to(tl.int64) * OH * OW + p, best, mask=pm)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, scale_shape,
                 maxpool_kernel_size, clamp_min, clamp_max):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.k = maxpool_kernel_size

    def forward(self, x):
        x = self.conv(x).contiguous()
        N, C, H, W = x.shape
        G = self.group_norm.num_groups
        k = self.k
        OH, OW = H // k, W // k
        stats = torch.empty((N * G, 2), dtype=torch.float32, device=x.device)
        group_stats_kernel[(N * G,)](x, stats, (C // G) * H * W, self.group_norm.eps, BLOCK=4096,
                                     num_warps=8)
        y = torch.empty((N, C, OH, OW), dtype=x.dtype, device=x.device)
        BLOCK_P = 256
        grid = (N * C, triton.cdiv(OH * OW, BLOCK_P))
        gn_scale_pool_clamp_kernel[grid](x, stats, self.group_norm.weight, self.group_norm.bias,
                                         self.scale.contiguous(), y, C, G, H, W, OH, OW,
                                         float(self.clamp_min), float(self.clamp_max), K=k,
                                         BLOCK_P=BLOCK_P, num_warps=4)
        return y
