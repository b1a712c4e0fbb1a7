# task: level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py
# expect: ok
# mode: gpu
# torch's Linear, then one Triton kernel for the tail: + add_value (per
# column), swish, tanh, exact GELU, hardtanh(-1, 1). The Linear and the
# add_value parameter are created in the reference's order, so both models
# get the same weights from the same seed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_act_kernel(y_ptr, add_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    col = offs % n_cols
    v = tl.load(y_ptr + offs, mask=mask, other=0.0)
    a = tl.load(add_ptr + col, mask=mask, other=0.0)
    v = v + a
    v = tl.sigmoid(v) * v                                  # swish
    v = 1.0 - 2.0 / (tl.exp(2.0 * v) + 1.0)                # tanh
    v = v * 0.5 * (1.0 + tl.erf(v * 0.7071067811865476))   # GELU (erf)
    v = tl.minimum(tl.maximum(v, -1.0), 1.0)               # hardtanh
    tl.store(out_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        y = self.matmul(x).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        n_cols = y.shape[-1]
        block = 2048
        add_act_kernel[(triton.cdiv(n, block),)](y, self.add_value, out, n, n_cols, BLOCK=block,
                                                num_warps=8)
        return out
