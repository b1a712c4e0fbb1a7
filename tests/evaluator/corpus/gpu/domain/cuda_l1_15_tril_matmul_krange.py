# task: level1/15_Matmul_for_lower_triangular_matrices.py
# expect: ok
# mode: gpu
# Lower-triangular A and B: C[i, j] = sum_{k=j..i} A[i, k] * B[k, j]. Each
# 32x32 output tile (2x2 per thread) loops only over the k range
# [col0, row0 + 32) that can be nonzero, so the zero triangles of A and B are
# never read; tiles above the diagonal run no k step and store zeros, and the
# epilogue zeroes everything above the diagonal as torch.tril does.
# AT_DISPATCH_FLOATING_TYPES, the current stream, C10_CUDA_KERNEL_LAUNCH_CHECK.
# Correct for triangular inputs, which is what get_inputs() gives.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tril_cpp = "torch::Tensor tril_matmul(torch::Tensor A, torch::Tensor B);"

tril_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

#define TILE 32
#define SUB 2   // each thread computes SUB x SUB outputs; block is 16 x 16 threads

template <typename scalar_t>
__global__ void tril_matmul_kernel(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B,
                                   scalar_t* __restrict__ C, int n) {
    __shared__ scalar_t As[TILE][TILE + 1];
    __shared__ scalar_t Bs[TILE][TILE + 1];
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;   // 16 x 16
    const int tid = ty * blockDim.x + tx;
    scalar_t acc[SUB][SUB];
    for (int i = 0; i < SUB; ++i)
        for (int j = 0; j < SUB; ++j) acc[i][j] = scalar_t(0);

    // k where A[i, k] and B[k, j] can both be nonzero for some (i, j) of the tile
    const int k_lo = (col0 / TILE) * TILE;
    const int k_hi = min(row0 + TILE, n);
    for (int k0 = k_lo; k0 < k_hi; k0 += TILE) {
        for (int e = tid; e < TILE * TILE; e += 256) {
            const int r = e / TILE, c = e % TILE;
            const int ar = row0 + r, ak = k0 + c;
            As[r][c] = (ar < n && ak < n) ? A[(int64_t)ar * n + ak] : scalar_t(0);
            const int bk = k0 + r, bc = col0 + c;
            Bs[r][c] = (bk < n && bc < n) ? B[(int64_t)bk * n + bc] : scalar_t(0);
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE; ++kk) {
            for (int i = 0; i < SUB; ++i) {
                const scalar_t a = As[ty * SUB + i][kk];
                for (int j = 0; j < SUB; ++j) acc[i][j] += a * Bs[kk][tx * SUB + j];
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < SUB; ++i) {
        const int r = row0 + ty * SUB + i;
        for (int j = 0; j < SUB; ++j) {
            const int c = col0 + tx * SUB + j;
            if (r < n && c < n) C[(int64_t)r * n + c] = (c <= r) ? acc[i][j] : scalar_t(0);
        }
    }
}

torch::Tensor tril_matmul(torch::Tensor A, torch::Tensor B) {
    CHECK_INPUT(A);
    CHECK_INPUT(B);
    TORCH_CHECK(A.dim() == 2 && A.size(0) == A.size(1), "A must be square");
    TORCH_CHECK(B.sizes() == A.sizes(), "A and B must have the same shape");
    TORCH_CHECK(A.scalar_type() == B.scalar_type(), "A and B must have the same dtype");
    const int n = (int)A.size(0);
    auto C = torch::empty_like(A);
    if (n == 0) return C;
    const dim3 block(16, 16);
    const dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "tril_matmul", ([&] {
        tril_matmul_kernel<scalar_t><<<grid, block, 0, stream>>>(
            A.data_ptr<scalar_t>(), B.data_ptr<scalar_t>(), C.data_ptr<scalar_t>(), n);
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

tril_ext = load_inline(
    name="tril_matmul_krange",
    cpp_sources=tril_cpp,
    cuda_sources=tril_cuda,
    functions=["tril_matmul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return tril_ext.tril_matmul(A.contiguous(), B.contiguous())
