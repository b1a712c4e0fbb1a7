# task: level2/99_Matmul_GELU_Softmax.py
# expect: incorrect
# mode: gpu
# hack: the Linear runs in torch, then a Triton kernel writes the uniform
# distribution 1/n_cols instead of softmax(GELU(y)). Rows sum to 1 (the
# rows-sum check passes) and most elements sit within atol=1e-4 of the true
# ~1.2e-4 values; the relative-norm check (error ~30% of ||ref||) and the
# largest elements must catch it: incorrect.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def uniform_rows_kernel(out_ptr, n_elements, inv_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    vals = tl.zeros((BLOCK,), dtype=tl.float32) + inv_cols
    tl.store(out_ptr + offs, vals, mask=offs < n_elements)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        out = torch.empty_like(y)
        n = out.numel()
        uniform_rows_kernel[(triton.cdiv(n, 4096),)](out, n, 1.0 / y.shape[-1], BLOCK=4096,
                                                     num_warps=8)
        return out
