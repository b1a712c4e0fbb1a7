# task: level1/47_Sum_reduction_over_a_dimension
# style: Triton; reduce the middle axis of an (outer, R, inner) view; tiles over inner; keepdim result
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_mid_kernel(x_ptr, out_ptr, R, INNER, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    o = tl.program_id(0).to(tl.int64)
    ib = tl.program_id(1)
    offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = offs_i < INNER
    acc = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
    base = x_ptr + o * R * INNER
    for r0 in range(0, R, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        ptrs = base + offs_r[:, None] * INNER + offs_i[None, :]
        acc += tl.load(ptrs, mask=(offs_r[:, None] < R) & mask_i[None, :], other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + o * INNER + offs_i, total, mask=mask_i)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        R = x.shape[dim]
        inner = x.numel() // (outer * R)
        out_shape = list(x.shape)
        out_shape[dim] = 1
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_I = 64
        grid = (outer, triton.cdiv(inner, BLOCK_I))
        _sum_mid_kernel[grid](x, out, R, inner, BLOCK_R=32, BLOCK_I=BLOCK_I, num_warps=4)
        return out
