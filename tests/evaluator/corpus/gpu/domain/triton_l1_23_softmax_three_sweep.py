# task: level1/23_Softmax.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# The plain (not online) wide-row softmax: one Triton program per row and
# three sweeps over column blocks of 8192 - the row max, the sum of
# exp(x - max), then the normalised write. Each sweep keeps a vector
# accumulator and reduces it once; nothing but the output is allocated.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_three_sweep_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK)
    m_vec = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        m_vec = tl.maximum(m_vec, tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")))
    m = tl.max(m_vec, axis=0)
    s_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))
        s_vec += tl.exp(x - m)
    s = tl.sum(s_vec, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, tl.exp(x - m) / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        block = min(8192, triton.next_power_of_2(n_cols))
        softmax_three_sweep_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block,
                                              num_warps=16)
        return y
