# task: level1/23_Softmax.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# Row softmax over 393216 columns: one Triton program per row, two passes.
# Pass 1 keeps a per-lane running max and a running sum rescaled to it
# (online softmax); the lanes are then combined. Pass 2 writes
# exp(x - max) / sum. The running max starts at a finite -3e38, so no
# (-inf) - (-inf) NaN can appear in masked lanes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    m_vec = tl.full((BLOCK,), -3.0e38, dtype=tl.float32)
    s_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m_vec, x)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    inv_s = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, tl.exp(x - m) * inv_s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        softmax_online_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=4096,
                                       num_warps=8)
        return y
