# task: level1/12_Matmul_with_diagonal_matrices_.py
# expect: ok
# mode: gpu
# diag(A) @ B never builds the N x N diagonal matrix: it is a row scale,
# C[i, :] = A[i] * B[i, :]. Rows on grid.y, columns on grid.x (each thread
# reads its row's scale once), AT_DISPATCH_FLOATING_TYPES, CHECK_INPUT
# macros, a host printf on the error path. One multiply per element: the same
# bits as the reference's A.unsqueeze(1) * B.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_cpp_source = "torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B);"

diag_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cmath>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

template <typename scalar_t>
__global__ void diag_row_scale_kernel(const scalar_t* __restrict__ diag,
                                      const scalar_t* __restrict__ B,
                                      scalar_t* __restrict__ C,
                                      int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const scalar_t d = diag[r];
        const scalar_t* b = B + r * cols;
        scalar_t* c = C + r * cols;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
             j += (int64_t)gridDim.x * blockDim.x) {
            c[j] = d * b[j];
        }
    }
}

torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B) {
    CHECK_INPUT(A);
    CHECK_INPUT(B);
    TORCH_CHECK(A.dim() == 1 && B.dim() == 2, "A must be 1-D and B 2-D");
    TORCH_CHECK(A.size(0) == B.size(0), "A has ", A.size(0), " entries, B has ", B.size(0), " rows");
    TORCH_CHECK(A.scalar_type() == B.scalar_type(), "A and B must have the same dtype");
    const int64_t rows = B.size(0), cols = B.size(1);
    auto C = torch::empty_like(B);
    if (rows == 0 || cols == 0) return C;
    const int threads = 256;
    int64_t bx = (cols + threads - 1) / threads;
    if (bx > 64) bx = 64;
    const int64_t by = rows < 65535 ? rows : 65535;
    const dim3 grid((unsigned)bx, (unsigned)by);
    AT_DISPATCH_FLOATING_TYPES(B.scalar_type(), "diag_row_scale_kernel", ([&] {
        diag_row_scale_kernel<scalar_t><<<grid, threads>>>(
            A.data_ptr<scalar_t>(), B.data_ptr<scalar_t>(), C.data_ptr<scalar_t>(), rows, cols);
    }));
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("diag_row_scale_kernel: %s\n", cudaGetErrorString(err));
    }
    TORCH_CHECK(err == cudaSuccess, "diag_row_scale_kernel failed: ", cudaGetErrorString(err));
    return C;
}
"""

diag_module = load_inline(
    name="diag_matmul_dispatch",
    cpp_sources=diag_cpp_source,
    cuda_sources=diag_cuda_source,
    functions=["diag_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return diag_module.diag_matmul(A.contiguous(), B.contiguous())
