# task: level1/24_LogSoftmax.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# Row log-softmax with an online first sweep: per-lane running max and a
# running sum of exp rescaled whenever the max grows, merged across lanes
# at the end; the second sweep writes x - max - log(sum). The running max
# starts at a finite -3e38 so masked lanes never compute (-inf) - (-inf).
# @triton.autotune over block size and warps (keyed on the row length).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
        triton.Config({"BLOCK": 8192}, num_warps=16),
    ],
    key=["n_cols"],
)
@triton.jit
def log_softmax_online_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK)
    m_vec = tl.full((BLOCK,), -3.0e38, dtype=tl.float32)
    s_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m_vec, x)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    log_s = tl.log(tl.sum(s_vec * tl.exp(m_vec - m), axis=0))
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, (x - m) - log_s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        log_softmax_online_kernel[(x2.shape[0],)](x2, y2, n_cols, x2.stride(0), y2.stride(0))
        return y2.view(xt.shape).movedim(-1, dim)
