# task: level1/37_FrobeniusNorm_.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (112 x 64 x 512 x 512 floats: 7 GiB in, 7 GiB out; issue #47)
# x / ||x||_F: a first kernel writes one float32 sum of squares per block of
# 16384 elements, the partial sums are added in float64 (115,000 of them),
# and a second kernel scales every element by 1 / norm.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_squares_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x * x, axis=0))


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, inv_norm, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * inv_norm, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        BLOCK = 16384
        blocks = triton.cdiv(n, BLOCK)
        partial = torch.empty(blocks, dtype=torch.float32, device=x.device)
        sum_squares_kernel[(blocks,)](x, partial, n, BLOCK=BLOCK, num_warps=8)
        norm = partial.double().sum().sqrt()
        y = torch.empty_like(x)
        scale_kernel[(blocks,)](x, y, n, (1.0 / norm).float().item(), BLOCK=BLOCK, num_warps=8)
        return y
