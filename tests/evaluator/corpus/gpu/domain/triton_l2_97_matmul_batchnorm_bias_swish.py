# task: level2/97_Matmul_BatchNorm_BiasAdd_Divide_Swish.py
# expect: ok
# mode: gpu
# torch's Linear, then one Triton program per block of 16 features that
# computes the features' batch mean and biased variance over all 1024 rows
# (two passes, fp32) and, in a third pass over the same rows, writes
# BatchNorm (training statistics) + the scalar bias, / divide_value and
# swish. Statistics and output in one kernel: no intermediate buffers.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_bias_div_swish_kernel(y_ptr, w_ptr, b_ptr, bias_ptr, out_ptr, M, N, stride_m, eps,
                             divide_value, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        acc += tl.load(y_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :], mask=mask,
                       other=0.0)
    mean = tl.sum(acc, axis=0) / M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        y = tl.load(y_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :], mask=mask,
                    other=0.0)
        d = tl.where(mask, y - mean[None, :], 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / M + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
    bias = tl.load(bias_ptr)
    for m0 in range(0, M, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        offs = rows[:, None].to(tl.int64) * stride_m + cols[None, :]
        y = tl.load(y_ptr + offs, mask=mask, other=0.0)
        v = (y - mean[None, :]) * rstd[None, :] * w[None, :] + b[None, :]
        v = (v + bias) / divide_value
        tl.store(out_ptr + offs, v * tl.sigmoid(v), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, bias_shape=(1,),
                 divide_value=1.0):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.divide_value = divide_value

    def forward(self, x):
        y = self.matmul(x).contiguous()
        M, N = y.shape
        if self.bias.numel() != 1:
            raise ValueError("this kernel adds a scalar (shape (1,)) bias")
        out = torch.empty_like(y)
        bn_bias_div_swish_kernel[(triton.cdiv(N, 16),)](
            y, self.bn.weight, self.bn.bias, self.bias, out, M, N, y.stride(0), self.bn.eps,
            float(self.divide_value), BLOCK_M=128, BLOCK_N=16, num_warps=4)
        return out
