# task: level2/59_Matmul_Swish_Scaling
# style: Triton; nn.Linear kept for the GEMM, fused Swish * scale epilogue kernel
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swish_scale_kernel(x_ptr, out_ptr, n, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = x * tl.sigmoid(x) * scale
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        out = torch.empty_like(x)
        n = x.numel()
        swish_scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, self.scaling_factor, BLOCK_SIZE=1024)
        return out
