# task: level2/99_Matmul_GELU_Softmax.py
# expect: ok
# mode: gpu
# torch's Linear, then one Triton program per row fusing the exact (erf)
# GELU and the row softmax (8192 columns fit in one block). Masked lanes are
# loaded as 0 and set to -inf only after the GELU (GELU(-inf) would be NaN).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_softmax_kernel(y_ptr, out_ptr, n_cols, stride_y, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0)
    g = v * 0.5 * (1.0 + tl.erf(v * 0.7071067811865476))
    g = tl.where(mask, g, -float("inf"))
    m = tl.max(g, axis=0)
    e = tl.exp(g - m)
    e = tl.where(mask, e, 0.0)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, e / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x).contiguous()
        rows, cols = y.shape
        out = torch.empty_like(y)
        block = triton.next_power_of_2(cols)
        gelu_softmax_kernel[(rows,)](y, out, cols, y.stride(0), out.stride(0), BLOCK=block,
                                     num_warps=16)
        return out
