# task: level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling.py
# expect: ok
# mode: gpu
# torch's ConvTranspose3d; nn.LayerNorm(out_channels) then normalises the
# LAST dimension of the (B, C, D, H, W) output, whose size (W = 64) equals
# out_channels here. Triton: the output seen as (rows, 64); a program
# normalises a (32 rows, 64) tile (mean, biased variance, affine), then
# exact GELU and the scaling factor.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_gelu_scale_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps, scaling,
                         BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(axis=0)
    rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cols = tl.arange(0, BLOCK_C)
    cmask = cols < n_cols
    mask = (rows[:, None] < n_rows) & cmask[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=1) / n_cols
    d = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
    v = d * rstd[:, None] * w[None, :] + b[None, :]
    g = v * 0.5 * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, g * scaling, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True, eps=1e-5,
                 scaling_factor=1.0):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size,
                                                 stride=stride, padding=padding, bias=bias)
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()
        n_cols = self.layer_norm.normalized_shape[0]
        if x.shape[-1] != n_cols:
            raise ValueError("LayerNorm normalises the last dimension, which must be out_channels")
        n_rows = x.numel() // n_cols
        y = torch.empty_like(x)
        BLOCK_R = 32
        ln_gelu_scale_kernel[(triton.cdiv(n_rows, BLOCK_R),)](
            x, self.layer_norm.weight, self.layer_norm.bias, y, n_rows, n_cols, self.layer_norm.eps,
            float(self.scaling_factor), BLOCK_R=BLOCK_R, BLOCK_C=triton.next_power_of_2(n_cols),
            num_warps=4)
        return y
