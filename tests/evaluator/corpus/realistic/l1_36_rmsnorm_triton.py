# task: level1/36_RMSNorm_
# style: Triton; 2-D launch grid (batch, spatial blocks); channel loop with tl.static_range-free runtime loop
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, C, S, eps, BLOCK_S: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    sblk = tl.program_id(1)
    offs = sblk * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = offs < S
    base = b * C * S
    acc = tl.zeros([BLOCK_S], dtype=tl.float32)
    for c in range(0, C):
        v = tl.load(x_ptr + base + c * S + offs, mask=mask, other=0.0)
        acc += v * v
    rms = tl.sqrt(acc / C + eps)
    for c in range(0, C):
        v = tl.load(x_ptr + base + c * S + offs, mask=mask, other=0.0)
        tl.store(out_ptr + base + c * S + offs, v / rms, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // (B * C)
        out = torch.empty_like(x)
        BLOCK_S = 1024
        grid = (B, triton.cdiv(S, BLOCK_S))
        rmsnorm_kernel[grid](x, out, C, S, self.eps, BLOCK_S=BLOCK_S, num_warps=4)
        return out
