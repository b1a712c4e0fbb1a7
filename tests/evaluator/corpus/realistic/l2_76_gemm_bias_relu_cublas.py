# task: level2/76_Gemm_Add_ReLU
# style: CUDA load_inline; cuBLAS SGEMM (x @ W^T with CUBLAS_OP_T) + fused bias/ReLU epilogue kernel; -lcublas
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_bias_relu_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t total, int N) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = y[i] + bias[i % N];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    const int M = xc.size(0), K = xc.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, xc.options());
    const float alpha = 1.0f, beta = 0.0f;
    auto handle = at::cuda::getCurrentCUDABlasHandle();
    auto status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha,
                              w.data_ptr<float>(), K, xc.data_ptr<float>(), K, &beta, y.data_ptr<float>(), N);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");
    bias_relu_kernel<<<132 * 16, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.contiguous().data_ptr<float>(), y.numel(), N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

gemm_bias_relu = load_inline(
    name="gemm_bias_relu",
    cpp_sources="torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=gemm_bias_relu_cuda,
    functions=["gemm_bias_relu"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return gemm_bias_relu.gemm_bias_relu(x, self.gemm.weight, self.bias)
