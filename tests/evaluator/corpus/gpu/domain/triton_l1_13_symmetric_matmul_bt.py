# task: level1/13_Matmul_for_symmetric_matrices.py
# expect: ok
# mode: gpu
# Exploits B == B^T: C = A @ B = A @ B^T, so both operands are read along
# their rows (k contiguous for A and for B), the access pattern of an "NT"
# GEMM. True fp32: tl.dot with input_precision="ieee", fp32 accumulator
# chained through tl.dot in ascending k. Correct only for symmetric B, which
# is what the task's get_inputs() guarantees.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_nt_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                     stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # grouped ordering: GROUP_M row tiles share the same B column tiles in L2
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        # tile[k, n] = B[n, k] (== B[k, n] for symmetric B)
        b = tl.load(b_ptr + offs_n[None, :] * stride_bn + kk[:, None] * stride_bk,
                    mask=(offs_n[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc, mask=c_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[0]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        BM, BN, BK = 64, 64, 32
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        matmul_nt_kernel[grid](A, B, C, M, N, K,
                               A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                               C.stride(0), C.stride(1),
                               BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                               num_warps=4, num_stages=3)
        return C
