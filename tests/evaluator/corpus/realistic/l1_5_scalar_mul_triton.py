# task: level1/5_Matrix_scalar_multiplication
# style: Triton; scalar passed as a runtime float argument; forward(self, A, s)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scalar_mul_kernel(a_ptr, c_ptr, s, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    tl.store(c_ptr + offs, a * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        A = A.contiguous()
        C = torch.empty_like(A)
        n = A.numel()
        BLOCK_SIZE = 4096
        scalar_mul_kernel[(triton.cdiv(n, BLOCK_SIZE),)](A, C, float(s), n, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return C
