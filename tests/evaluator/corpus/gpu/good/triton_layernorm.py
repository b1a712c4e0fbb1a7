# task: level1/40_LayerNorm.py
# expect: ok
# mode: gpu
# LayerNorm over the last three dims (64*256*256 = 4M elements per row, 16
# rows): far too long for one program per row, so three Triton kernels on a
# (rows, chunks) grid:
#   1. per-chunk partial sums;
#   2. every program re-reduces its row's partial sums to the mean, then
#      writes the partial sum of squared deviations (two-pass variance: exact
#      zero for a constant row, no E[x^2] - mean^2 cancellation);
#   3. every program re-reduces both partial rows to mean and rstd and
#      writes (x - mean) * rstd * weight + bias.
# The nn.LayerNorm submodule is kept for its parameters (ones and zeros, as
# the reference's) and eps.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_total(part_ptr, row, n_chunks, PBLOCK: tl.constexpr):
    acc = tl.zeros((PBLOCK,), dtype=tl.float32)
    for start in range(0, n_chunks, PBLOCK):
        idx = start + tl.arange(0, PBLOCK)
        acc += tl.load(part_ptr + row * n_chunks + idx, mask=idx < n_chunks, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def ln_partial_sum_kernel(x_ptr, psum_ptr, N, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    chunk = tl.program_id(axis=1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0)
    tl.store(psum_ptr + row * n_chunks + chunk, tl.sum(x, axis=0))


@triton.jit
def ln_partial_sq_kernel(x_ptr, psum_ptr, psq_ptr, N, n_chunks, inv_n,
                         BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    chunk = tl.program_id(axis=1)
    mean = row_total(psum_ptr, row, n_chunks, PBLOCK) * inv_n
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0)
    d = tl.where(mask, x - mean, 0.0)
    tl.store(psq_ptr + row * n_chunks + chunk, tl.sum(d * d, axis=0))


@triton.jit
def ln_normalize_kernel(x_ptr, w_ptr, b_ptr, y_ptr, psum_ptr, psq_ptr, N, n_chunks, inv_n, eps,
                        BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    chunk = tl.program_id(axis=1)
    mean = row_total(psum_ptr, row, n_chunks, PBLOCK) * inv_n
    var = row_total(psq_ptr, row, n_chunks, PBLOCK) * inv_n
    rstd = 1.0 / tl.sqrt(var + eps)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * N + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        weight = self.ln.weight.contiguous()
        bias = self.ln.bias.contiguous()
        n = weight.numel()
        rows = x.numel() // n
        block = 4096
        n_chunks = triton.cdiv(n, block)
        pblock = min(1024, triton.next_power_of_2(n_chunks))
        psum = torch.empty((rows, n_chunks), dtype=torch.float32, device=x.device)
        psq = torch.empty((rows, n_chunks), dtype=torch.float32, device=x.device)
        y = torch.empty_like(x)
        inv_n = 1.0 / n
        grid = (rows, n_chunks)
        ln_partial_sum_kernel[grid](x, psum, n, n_chunks, BLOCK=block, num_warps=8)
        ln_partial_sq_kernel[grid](x, psum, psq, n, n_chunks, inv_n, BLOCK=block, PBLOCK=pblock,
                                   num_warps=8)
        ln_normalize_kernel[grid](x, weight, bias, y, psum, psq, n, n_chunks, inv_n, self.ln.eps,
                                  BLOCK=block, PBLOCK=pblock, num_warps=8)
        return y
