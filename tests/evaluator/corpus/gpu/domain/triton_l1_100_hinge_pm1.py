# task: level1/100_HingeLoss.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (32768 x 32768 fp32 predictions: 4 GiB)
# mean(clamp(1 - predictions * targets, min=0)) where targets has shape
# (batch,) and so broadcasts along the last dimension (column j uses
# targets[j]). The grid is (column blocks, row groups): each program loads
# its 1024 targets once and reuses them for the 256 rows it walks. Partial
# sums go to a small buffer (one per program), reduced in float64 by a second
# program, then divided by the element count into a 0-d output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def hinge_partial_kernel(p_ptr, t_ptr, part_ptr, n_rows, n_cols, stride_row,
                         ROWS_PER_PROG: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_c = tl.program_id(axis=0)
    pid_r = tl.program_id(axis=1)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < n_cols
    t = tl.load(t_ptr + cols, mask=cmask, other=0.0)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    row0 = pid_r * ROWS_PER_PROG
    for i in range(0, ROWS_PER_PROG):
        row = row0 + i
        m = cmask & (row < n_rows)
        p = tl.load(p_ptr + row.to(tl.int64) * stride_row + cols, mask=m, other=0.0)
        h = tl.maximum(1.0 - p * t, 0.0)
        acc += tl.where(m, h, 0.0)
    tl.store(part_ptr + pid_r * tl.num_programs(0) + pid_c, tl.sum(acc, axis=0))


@triton.jit
def finalize_kernel(part_ptr, out_ptr, n_parts, inv_count, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for start in range(0, n_parts, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + idx, mask=idx < n_parts, other=0.0).to(tl.float64)
    total = tl.sum(acc, axis=0) * inv_count
    tl.store(out_ptr, total.to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous()
        t = targets.contiguous()
        n_cols = p.shape[-1]
        n_rows = p.numel() // n_cols
        p2 = p.view(n_rows, n_cols)
        if t.numel() != n_cols:
            raise ValueError("targets must broadcast along the last dimension of predictions")
        BLOCK_C, ROWS = 1024, 256
        grid = (triton.cdiv(n_cols, BLOCK_C), triton.cdiv(n_rows, ROWS))
        parts = torch.empty((grid[0] * grid[1],), dtype=torch.float32, device=p.device)
        out = torch.empty((), dtype=torch.float32, device=p.device)
        hinge_partial_kernel[grid](p2, t, parts, n_rows, n_cols, p2.stride(0),
                                   ROWS_PER_PROG=ROWS, BLOCK_C=BLOCK_C, num_warps=4)
        finalize_kernel[(1,)](parts, out, parts.numel(), 1.0 / p.numel(), BLOCK=1024,
                              num_warps=4)
        return out
