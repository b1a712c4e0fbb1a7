# task: level1/14_Matmul_for_upper_triangular_matrices.py
# expect: ok
# mode: gpu
# torch.triu(A @ B) with a shared-memory tiled SGEMM (64x64 tiles, 4x4 per
# thread, fp32 FMA). Blocks whose tile lies entirely below the diagonal only
# write zeros and return; diagonal tiles zero their lower part. The full k
# range is summed, so the kernel uses only the output's structure and is
# right for any A and B.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor triu_matmul(torch::Tensor A, torch::Tensor B);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 16;
constexpr int TM = 4;
constexpr int TN = 4;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256

__global__ void triu_matmul_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                   float* __restrict__ C, int n) {
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int tid = threadIdx.x;
    if (row0 > col0 + BN - 1) {  // the whole tile is below the diagonal
        for (int e = tid; e < BM * BN; e += THREADS) {
            const int r = row0 + e / BN;
            const int c = col0 + e % BN;
            if (r < n && c < n) C[(int64_t)r * n + c] = 0.0f;
        }
        return;
    }
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int ty = tid / (BN / TN);
    const int tx = tid % (BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < n; k0 += BK) {
#pragma unroll
        for (int l = 0; l < (BM * BK) / THREADS; ++l) {
            const int e = tid + l * THREADS;
            const int r = e / BK, kk = e % BK;
            const int gr = row0 + r, gk = k0 + kk;
            As[kk][r] = (gr < n && gk < n) ? A[(int64_t)gr * n + gk] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < (BK * BN) / THREADS; ++l) {
            const int e = tid + l * THREADS;
            const int kk = e / BN, c = e % BN;
            const int gk = k0 + kk, gc = col0 + c;
            Bs[kk][c] = (gk < n && gc < n) ? B[(int64_t)gk * n + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tx * TN + j;
            if (r < n && c < n) C[(int64_t)r * n + c] = (r <= c) ? acc[i][j] : 0.0f;
        }
    }
}

torch::Tensor triu_matmul(torch::Tensor A, torch::Tensor B) {
    CHECK_INPUT(A);
    CHECK_INPUT(B);
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
                "triu_matmul: float32 inputs expected");
    TORCH_CHECK(A.dim() == 2 && A.size(0) == A.size(1) && B.sizes() == A.sizes(),
                "triu_matmul: two square matrices of the same size expected");
    const int n = (int)A.size(0);
    auto C = torch::empty({n, n}, A.options());
    if (n == 0) return C;
    dim3 grid((n + BN - 1) / BN, (n + BM - 1) / BM);
    triu_matmul_kernel<<<grid, THREADS>>>(A.data_ptr<float>(), B.data_ptr<float>(),
                                          C.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("triu_matmul_kernel launch failed: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "triu_matmul_kernel launch failed: ", cudaGetErrorString(err));
    }
    return C;
}
"""

triu_ext = load_inline(
    name="triu_matmul_tiles_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["triu_matmul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return triu_ext.triu_matmul(A.contiguous(), B.contiguous())
