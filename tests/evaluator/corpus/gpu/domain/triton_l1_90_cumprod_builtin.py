# task: level1/90_cumprod.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (32768 x 32768 fp32: 4 GiB in, 4 GiB out)
# cumprod along the rows with the built-in tl.cumprod: one program per row,
# blocks of 2048 scanned in parallel and multiplied by the product of the
# earlier blocks. The block's total is its scan's last lane (picked with a
# one-hot select and a sum, which adds only zeros to it). Masked lanes
# load 1.0, the identity of the product.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumprod_builtin_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    carry = tl.full((BLOCK,), 1.0, dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        inb = cols < n_cols
        v = tl.load(x_ptr + row * stride_x + cols, mask=inb, other=1.0)
        p = tl.cumprod(v, axis=0)
        tl.store(y_ptr + row * stride_y + cols, p * carry, mask=inb)
        carry = carry * tl.sum(tl.where(offs == BLOCK - 1, p, 0.0), axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        cumprod_builtin_kernel[(x2.shape[0],)](x2, y2, n_cols, x2.stride(0), y2.stride(0),
                                               BLOCK=2048, num_warps=8)
        return y2.view(xt.shape).movedim(-1, dim)
