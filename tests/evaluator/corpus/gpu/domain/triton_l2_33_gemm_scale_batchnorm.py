# task: level2/33_Gemm_Scale_BatchNorm.py
# expect: ok
# mode: gpu
# torch's Linear, then training-mode BatchNorm1d of (y * scale) in two
# Triton kernels: per-feature batch statistics (a program per 64 features,
# two passes over the 1024 rows: mean, then the biased variance of the
# deviations, all fp32), and an elementwise kernel that recomputes
# y * scale and applies (z - mean) * rstd * gamma + beta. The module's
# running statistics are updated as nn.BatchNorm1d does (unbiased variance,
# momentum); they do not change this call's output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_col_stats_kernel(y_ptr, scale_ptr, mean_ptr, var_ptr, M, N, stride_m,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    sc = tl.load(scale_ptr + cols, mask=cmask, other=0.0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        y = tl.load(y_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :], mask=mask, other=0.0)
        acc += y * sc[None, :]
    mean = tl.sum(acc, axis=0) / M
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        y = tl.load(y_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :], mask=mask, other=0.0)
        d = tl.where(mask, y * sc[None, :] - mean[None, :], 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / M
    tl.store(mean_ptr + cols, mean, mask=cmask)
    tl.store(var_ptr + cols, var, mask=cmask)


@triton.jit
def scale_bn_apply_kernel(y_ptr, scale_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, out_ptr, M, N,
                          stride_m, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows[:, None] < M) & cmask[None, :]
    sc = tl.load(scale_ptr + cols, mask=cmask, other=0.0)
    mean = tl.load(mean_ptr + cols, mask=cmask, other=0.0)
    var = tl.load(var_ptr + cols, mask=cmask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    offs = rows[:, None].to(tl.int64) * stride_m + cols[None, :]
    z = tl.load(y_ptr + offs, mask=mask, other=0.0) * sc[None, :]
    out = (z - mean[None, :]) * rstd[None, :] * w[None, :] + b[None, :]
    tl.store(out_ptr + offs, out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        y = self.gemm(x).contiguous()
        M, N = y.shape
        mean = torch.empty((N,), dtype=torch.float32, device=y.device)
        var = torch.empty((N,), dtype=torch.float32, device=y.device)
        out = torch.empty_like(y)
        scale = self.scale.contiguous()
        scaled_col_stats_kernel[(triton.cdiv(N, 64),)](y, scale, mean, var, M, N, y.stride(0),
                                                       BLOCK_M=64, BLOCK_N=64, num_warps=4)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 128))
        scale_bn_apply_kernel[grid](y, scale, mean, var, self.bn.weight, self.bn.bias, out, M, N,
                                    y.stride(0), self.bn.eps, BLOCK_M=32, BLOCK_N=128,
                                    num_warps=4)
        if self.training and self.bn.track_running_stats:
            with torch.no_grad():
                self.bn.num_batches_tracked += 1
                m = self.bn.momentum
                self.bn.running_mean.mul_(1.0 - m).add_(mean, alpha=m)
                self.bn.running_var.mul_(1.0 - m).add_(var * (M / max(M - 1, 1)), alpha=m)
        return out
