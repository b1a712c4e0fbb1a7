# task: level1/12_Matmul_with_diagonal_matrices_
# style: CUDA load_inline; diag(A) @ B as a row scaling with a 2-D grid; never materialises diag(A)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_matmul_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void diag_matmul_kernel(const float* __restrict__ a, const float* __restrict__ B,
                                   float* __restrict__ C, int N, int M) {
    const int row = blockIdx.y;
    const float scale = a[row];
    for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < M; col += gridDim.x * blockDim.x) {
        C[(int64_t)row * M + col] = scale * B[(int64_t)row * M + col];
    }
}

torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B) {
    auto a = A.contiguous();
    auto b = B.contiguous();
    const int N = b.size(0), M = b.size(1);
    auto C = torch::empty_like(b);
    dim3 grid(4, N);
    diag_matmul_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), C.data_ptr<float>(), N, M);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

diag_matmul = load_inline(
    name="diag_matmul",
    cpp_sources="torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B);",
    cuda_sources=diag_matmul_source,
    functions=["diag_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.diag_matmul = diag_matmul

    def forward(self, A, B):
        return self.diag_matmul.diag_matmul(A, B)
