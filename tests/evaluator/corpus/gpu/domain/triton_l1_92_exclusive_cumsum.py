# task: level1/92_cumsum_exclusive.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (32768 x 32768 fp32: 4 GiB in, 4 GiB out)
# Exclusive cumsum: out[:, 0] = 0 and out[:, j] = x[:, 0] + ... + x[:, j-1].
# Each block loads x shifted right by one column (column j reads x[j - 1],
# column 0 reads 0), so an inclusive tl.cumsum of the shifted block plus the
# running carry is the exclusive sum, with the same additions as the
# reference's cumsum of x[:, :-1].
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exclusive_cumsum_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        src = cols - 1
        v = tl.load(x_ptr + row * stride_x + src, mask=(src >= 0) & (cols < n_cols), other=0.0)
        s = tl.cumsum(v, axis=0) + carry
        tl.store(y_ptr + row * stride_y + cols, s, mask=cols < n_cols)
        carry = carry + tl.sum(v, axis=0)


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
        exclusive_cumsum_kernel[(x2.shape[0],)](x2, y2, n_cols, x2.stride(0), y2.stride(0),
                                                BLOCK=2048, num_warps=8)
        return y2.view(xt.shape).movedim(-1, dim)
