# task: level2/86_Matmul_Divide_GELU
# style: CUDA load_inline; fused divide + exact GELU using CUDART_SQRT_HALF_F; <math_constants.h>, <cuda_runtime.h>
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

div_gelu_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math_constants.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void div_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, float inv_divisor, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i] * inv_divisor;
        y[i] = 0.5f * v * (1.0f + erff(v * CUDART_SQRT_HALF_F));
    }
}

torch::Tensor div_gelu(torch::Tensor x, double divisor) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int threads = 256;
    div_gelu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), (float)(1.0 / divisor), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

div_gelu_ext = load_inline(
    name="div_gelu_ext",
    cpp_sources="torch::Tensor div_gelu(torch::Tensor x, double divisor);",
    cuda_sources=div_gelu_src,
    functions=["div_gelu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return div_gelu_ext.div_gelu(self.linear(x), self.divisor)
