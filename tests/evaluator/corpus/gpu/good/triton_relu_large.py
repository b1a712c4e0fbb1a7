# task: level1/19_ReLU.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out; issue #47)
# ReLU: one Triton program per block of 8192 elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, unused, BLOCK: tl.constexpr):
    start = tl.program_id(axis=0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 8192
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, 0.0, BLOCK=BLOCK,
                                  num_warps=8)
        return y
