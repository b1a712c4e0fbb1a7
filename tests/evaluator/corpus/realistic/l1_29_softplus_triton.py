# task: level1/29_Softplus
# style: Triton; numerically stable softplus with torch's threshold; constants as tl.constexpr module globals
import torch
import torch.nn as nn
import triton
import triton.language as tl

THRESHOLD = tl.constexpr(20.0)


@triton.jit
def softplus_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    soft = tl.log(1.0 + tl.exp(x))
    y = tl.where(x > THRESHOLD, x, soft)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        softplus_kernel[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048, num_warps=8)
        return y
