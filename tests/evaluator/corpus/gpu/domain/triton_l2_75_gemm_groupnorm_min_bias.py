# task: level2/75_Gemm_GroupNorm_Min_BiasAdd.py
# expect: ok
# mode: gpu
# torch's Linear; kernel 1: one program per row, the row as a
# (512 groups, 16) tile, GroupNorm statistics per group, affine, and the
# minimum over all 8192 normalised features (a row's min never needs the
# normalised row in memory). Kernel 2 writes the broadcast the reference
# produces: (batch, 1) + bias (1, C, 1, 1) is (1, C, batch, 1), element
# [0, c, r, 0] = rowmin[r] + bias[c].
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gn_rowmin_kernel(y_ptr, gamma_ptr, beta_ptr, min_ptr, stride_row, G, GS, eps,
                     BLOCK_G: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    g = tl.arange(0, BLOCK_G)
    s = tl.arange(0, BLOCK_S)
    mask = (g[:, None] < G) & (s[None, :] < GS)
    ch = g[:, None] * GS + s[None, :]
    v = tl.load(y_ptr + row * stride_row + ch, mask=mask, other=0.0)
    mean = tl.sum(v, axis=1) / GS
    d = tl.where(mask, v - mean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / GS
    rstd = 1.0 / tl.sqrt(var + eps)
    gamma = tl.load(gamma_ptr + ch, mask=mask, other=0.0)
    beta = tl.load(beta_ptr + ch, mask=mask, other=0.0)
    x = d * rstd[:, None] * gamma + beta
    x = tl.where(mask, x, float("inf"))
    tl.store(min_ptr + row, tl.min(tl.min(x, axis=1), axis=0))


@triton.jit
def broadcast_bias_kernel(min_ptr, bias_ptr, out_ptr, B, C, BLOCK_C: tl.constexpr,
                          BLOCK_B: tl.constexpr):
    pid_c = tl.program_id(axis=0)
    pid_b = tl.program_id(axis=1)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    rs = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    bias = tl.load(bias_ptr + cs, mask=cs < C, other=0.0)
    mn = tl.load(min_ptr + rs, mask=rs < B, other=0.0)
    out = bias[:, None] + mn[None, :]
    tl.store(out_ptr + cs[:, None].to(tl.int64) * B + rs[None, :], out,
             mask=(cs[:, None] < C) & (rs[None, :] < B))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.gemm(x).contiguous()
        B, C = y.shape
        G = self.group_norm.num_groups
        GS = C // G
        if self.bias.numel() != C or self.bias.dim() != 4 or self.bias.shape[1] != C:
            raise ValueError("bias of shape (1, C, 1, 1) expected")
        row_min = torch.empty((B,), dtype=torch.float32, device=y.device)
        gn_rowmin_kernel[(B,)](y, self.group_norm.weight, self.group_norm.bias, row_min,
                               y.stride(0), G, GS, self.group_norm.eps,
                               BLOCK_G=triton.next_power_of_2(G), BLOCK_S=triton.next_power_of_2(GS),
                               num_warps=8)
        out = torch.empty((1, C, B, 1), dtype=torch.float32, device=y.device)
        grid = (triton.cdiv(C, 64), triton.cdiv(B, 64))
        broadcast_bias_kernel[grid](row_min, self.bias.contiguous(), out, B, C, BLOCK_C=64,
                                    BLOCK_B=64, num_warps=4)
        return out
