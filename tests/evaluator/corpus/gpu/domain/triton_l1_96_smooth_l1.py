# task: level1/96_HuberLoss.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (two 32768 x 32768 fp32 inputs: 8 GiB)
# smooth_l1_loss (beta = 1): 0.5 * d^2 / beta where |d| < beta, else
# |d| - 0.5 * beta, averaged. Persistent-style grid: 4096 programs, each
# walks a contiguous span of the flattened inputs in 4096-element blocks,
# keeps a vector accumulator and writes one partial sum; one more program
# reduces the partials in float64 into the 0-d mean.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def smooth_l1_partial_kernel(p_ptr, t_ptr, part_ptr, n, span, beta, half_beta,
                             BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    start0 = pid * span
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, span, BLOCK):
        idx = start0 + s + offs
        m = (idx < n) & (s + offs < span)
        p = tl.load(p_ptr + idx, mask=m, other=0.0)
        t = tl.load(t_ptr + idx, mask=m, other=0.0)
        d = tl.abs(p - t)
        l = tl.where(d < beta, 0.5 * d * d / beta, d - half_beta)
        acc += tl.where(m, l, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def sum_partials_kernel(part_ptr, out_ptr, n_parts, inv_n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for start in range(0, n_parts, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + idx, mask=idx < n_parts, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(acc, axis=0) * inv_n).to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.beta = 1.0

    def forward(self, predictions, targets):
        p = predictions.contiguous().view(-1)
        t = targets.contiguous().view(-1)
        n = p.numel()
        BLOCK = 4096
        n_progs = max(1, min(4096, triton.cdiv(n, BLOCK)))
        span = triton.cdiv(triton.cdiv(n, n_progs), BLOCK) * BLOCK
        n_progs = triton.cdiv(n, span)
        parts = torch.empty((n_progs,), dtype=torch.float32, device=p.device)
        out = torch.empty((), dtype=torch.float32, device=p.device)
        smooth_l1_partial_kernel[(n_progs,)](p, t, parts, n, span, self.beta, 0.5 * self.beta,
                                             BLOCK=BLOCK, num_warps=8)
        sum_partials_kernel[(1,)](parts, out, n_progs, 1.0 / n, BLOCK=1024, num_warps=4)
        return out
