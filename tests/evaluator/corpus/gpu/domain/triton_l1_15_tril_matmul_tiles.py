# task: level1/15_Matmul_for_lower_triangular_matrices.py
# expect: ok
# mode: gpu
# torch.tril(A @ B): output tiles entirely above the diagonal are known to
# be zero and are written without any k loop (the k loop's upper bound is 0
# for them); the other tiles run the full-K true-fp32 GEMM
# (input_precision="ieee") and zero their elements above the diagonal. Uses
# the structure of the output only, so it is right for any A and B.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tril_matmul_kernel(a_ptr, b_ptr, c_ptr, N, stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    rows = (row0 + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = (col0 + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    # the tile's smallest column is past its largest row: all of it is above the diagonal
    k_end = tl.where(col0 > row0 + BLOCK_M - 1, 0, N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_end, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + rows[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rows[:, None] < N) & (kk[None, :] < N), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(kk[:, None] < N) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.where(rows[:, None] >= cols[None, :], acc, 0.0)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < N) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        n = A.shape[0]
        C = torch.empty((n, n), device=A.device, dtype=torch.float32)
        BM, BN, BK = 64, 64, 32
        grid = (triton.cdiv(n, BM), triton.cdiv(n, BN))
        tril_matmul_kernel[grid](A, B, C, n, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                 C.stride(0), C.stride(1),
                                 BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4, num_stages=3)
        return C
