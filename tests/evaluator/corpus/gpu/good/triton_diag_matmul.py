# task: level1/12_Matmul_with_diagonal_matrices_.py
# expect: ok
# mode: gpu
# diag(A) @ B without the N x N matrix: a 2-D tiled Triton kernel scales row
# i of B by A[i] (one multiply per element, so bit-identical to the
# reference's A.unsqueeze(1) * B).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def diag_scale_kernel(a_ptr, b_ptr, c_ptr, N, M, stride_bn, stride_bm, stride_cn, stride_cm,
                      BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    pid_n = tl.program_id(axis=0)
    pid_m = tl.program_id(axis=1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < N
    mask = row_mask[:, None] & (cols[None, :] < M)
    a = tl.load(a_ptr + rows, mask=row_mask, other=0.0)
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    b = tl.load(b_ptr + rows64[:, None] * stride_bn + cols64[None, :] * stride_bm, mask=mask, other=0.0)
    tl.store(c_ptr + rows64[:, None] * stride_cn + cols64[None, :] * stride_cm, a[:, None] * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        n, m = B.shape
        C = torch.empty((n, m), dtype=B.dtype, device=B.device)
        block_n, block_m = 32, 128
        grid = (triton.cdiv(n, block_n), triton.cdiv(m, block_m))
        diag_scale_kernel[grid](A, B, C, n, m, B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                                BLOCK_N=block_n, BLOCK_M=block_m, num_warps=4)
        return C
