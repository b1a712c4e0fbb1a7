# task: level1/14_Matmul_for_upper_triangular_matrices.py
# expect: ok
# mode: gpu
# Upper-triangular A and B: C[i, j] = sum_{k=i..j} A[i, k] * B[k, j]. Each
# output tile sums only over the k range [row0, col_end) that can be nonzero
# (the zero triangles of A and B are skipped), tiles entirely below the
# diagonal run no k iteration, and everything below the diagonal is written
# as 0, as torch.triu(A @ B) does. True fp32 (input_precision="ieee").
# Correct for triangular inputs, which is what get_inputs() gives.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def triu_matmul_kernel(a_ptr, b_ptr, c_ptr, N, stride_a, stride_b, stride_c,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    rows = (row0 + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = (col0 + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    # A[i, k] == 0 for k < i and B[k, j] == 0 for k > j: only k in
    # [row0, min(col0 + BLOCK_N, N)) can contribute to this tile.
    k_lo = (row0 // BLOCK_K) * BLOCK_K
    k_hi = tl.minimum(col0 + BLOCK_N, N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + rows[:, None] * stride_a + kk[None, :],
                    mask=(rows[:, None] < N) & (kk[None, :] < N), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_b + cols[None, :],
                    mask=(kk[:, None] < N) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.where(rows[:, None] <= cols[None, :], acc, 0.0)
    tl.store(c_ptr + rows[:, None] * stride_c + cols[None, :], acc,
             mask=(rows[:, None] < N) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        N = A.shape[0]
        C = torch.empty((N, N), device=A.device, dtype=A.dtype)
        BM, BN, BK = 64, 64, 32
        grid = (triton.cdiv(N, BM), triton.cdiv(N, BN))
        triu_matmul_kernel[grid](A, B, C, N, A.stride(0), B.stride(0), C.stride(0),
                                 BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4, num_stages=3)
        return C
