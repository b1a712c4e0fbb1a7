# task: level1/40_LayerNorm
# style: Triton; two kernels (chunk statistics, then normalise + affine); torch sums the tiny partials tensor
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CHUNK = 4096


@triton.jit
def _ln_stats_kernel(x_ptr, part_ptr, row_len, n_chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offs < row_len
    x = tl.load(x_ptr + row * row_len + offs, mask=mask, other=0.0)
    s = tl.sum(x, axis=0)
    ss = tl.sum(x * x, axis=0)
    base = (row * n_chunks + chunk) * 2
    tl.store(part_ptr + base, s.to(tl.float64))
    tl.store(part_ptr + base + 1, ss.to(tl.float64))


@triton.jit
def _ln_apply_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, row_len, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offs < row_len
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row * row_len + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=1.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_len + offs, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        row_len = self.ln.weight.numel()
        rows = x.numel() // row_len
        n_chunks = triton.cdiv(row_len, _CHUNK)
        partials = torch.empty((rows, n_chunks, 2), device=x.device, dtype=torch.float64)
        _ln_stats_kernel[(rows, n_chunks)](x, partials, row_len, n_chunks, CHUNK=_CHUNK, num_warps=8)
        sums = partials.sum(dim=1)
        mean = sums[:, 0] / row_len
        var = sums[:, 1] / row_len - mean * mean
        rstd = torch.rsqrt(var + self.ln.eps)
        y = torch.empty_like(x)
        _ln_apply_kernel[(rows, n_chunks)](x, y, self.ln.weight, self.ln.bias,
                                           mean.float().contiguous(), rstd.float().contiguous(),
                                           row_len, CHUNK=_CHUNK, num_warps=8)
        return y
