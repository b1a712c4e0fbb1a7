# task: level1/1_Square_matrix_multiplication_
# style: CUDA load_inline calling cuBLAS (<cublas_v2.h>, torch's handle); extra_ldflags=["-lcublas"]; row-major trick
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matmul_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor matmul_cublas(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "A and B must be CUDA tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "shape mismatch");
    TORCH_CHECK(A.scalar_type() == at::kFloat && B.scalar_type() == at::kFloat, "float32 only");
    auto a = A.contiguous();
    auto b = B.contiguous();
    const int M = (int)a.size(0);
    const int K = (int)a.size(1);
    const int N = (int)b.size(1);
    auto C = torch::empty({M, N}, a.options());
    const float alpha = 1.0f;
    const float beta = 0.0f;
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    // Row-major C = A * B is column-major C^T = B^T * A^T.
    cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                                        b.data_ptr<float>(), N, a.data_ptr<float>(), K, &beta,
                                        C.data_ptr<float>(), N);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed with status ", (int)status);
    return C;
}
"""

matmul_cpp = "torch::Tensor matmul_cublas(torch::Tensor A, torch::Tensor B);"

matmul_ext = load_inline(
    name="matmul_cublas_ext",
    cpp_sources=matmul_cpp,
    cuda_sources=matmul_source,
    functions=["matmul_cublas"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_cublas(A, B)
