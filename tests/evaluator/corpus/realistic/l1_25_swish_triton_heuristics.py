# task: level1/25_Swish
# style: Triton; @triton.heuristics for an EVEN_N fast path; tl.sigmoid; class TritonSwish aliased as ModelNew
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"EVEN_N": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def _swish_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offsets)
        tl.store(out_ptr + offsets, x * tl.sigmoid(x))
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        tl.store(out_ptr + offsets, x * tl.sigmoid(x), mask=mask)


class TritonSwish(nn.Module):
    def __init__(self, block_size: int = 1024):
        super().__init__()
        self.block_size = block_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _swish_kernel[(triton.cdiv(n, self.block_size),)](x, out, n, BLOCK_SIZE=self.block_size)
        return out


ModelNew = TritonSwish
