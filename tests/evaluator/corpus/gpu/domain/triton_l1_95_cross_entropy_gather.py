# task: level1/95_CrossEntropyLoss.py
# expect: ok
# mode: gpu
# Cross entropy with integer class targets: loss_i = logsumexp(x_i) - x_i[t_i].
# The target is an index, so the kernel gathers the one logit it needs
# instead of building a one-hot or a full log_softmax. One program per row
# (4096 classes in one block) writes the row's loss to an O(rows) buffer;
# a second, single-program kernel sums the buffer in a fixed order and
# writes the mean into a 0-d output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ce_row_kernel(logits_ptr, target_ptr, loss_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    base = logits_ptr + row * stride_row
    offs = tl.arange(0, BLOCK)
    m_vec = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf"))
        m_vec = tl.maximum(m_vec, x)
    m = tl.max(m_vec, axis=0)
    s_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf"))
        s_vec += tl.exp(x - m)
    lse = m + tl.log(tl.sum(s_vec, axis=0))
    t = tl.load(target_ptr + row)
    picked = tl.load(base + t)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def mean_kernel(v_ptr, out_ptr, n, inv_n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(v_ptr + idx, mask=idx < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) * inv_n)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        logits = predictions.contiguous()
        tgt = targets.contiguous()
        rows, n_cols = logits.shape
        row_loss = torch.empty((rows,), dtype=torch.float32, device=logits.device)
        out = torch.empty((), dtype=torch.float32, device=logits.device)
        block = min(4096, triton.next_power_of_2(n_cols))
        ce_row_kernel[(rows,)](logits, tgt, row_loss, n_cols, logits.stride(0), BLOCK=block,
                               num_warps=8)
        mean_kernel[(1,)](row_loss, out, rows, 1.0 / rows, BLOCK=1024, num_warps=4)
        return out
