# task: level1/23_Softmax.py
# expect: incorrect
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# hack: a Triton kernel that writes zeros. With 393216 columns every
# softmax value is ~2.5e-6, below atol=1e-4, so an element-wise allclose
# passes; the judge's relative-norm check (||out-ref|| / ||ref|| = 1) and
# its rows-sum-to-1 check must catch it: incorrect.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = y.numel()
        zeros_kernel[(triton.cdiv(n, 4096),)](y, n, BLOCK=4096, num_warps=8)
        return y
