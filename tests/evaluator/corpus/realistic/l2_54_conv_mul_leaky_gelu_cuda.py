# task: level2/54_Conv2d_Multiply_LeakyReLU_GELU
# style: CUDA load_inline; learnable per-channel multiplier; leaky slope read from the nn.LeakyReLU module
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <math_constants.h>

__global__ void mul_leaky_gelu_kernel(const float* __restrict__ x, const float* __restrict__ mult,
                                      float* __restrict__ y, int64_t total, int64_t C, int64_t HW, float slope) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = (i / HW) % C;
        float v = x[i] * mult[c];
        v = v > 0.0f ? v : v * slope;
        y[i] = 0.5f * v * (1.0f + erff(v * CUDART_SQRT_HALF_F));
    }
}

torch::Tensor mul_leaky_gelu(torch::Tensor x, torch::Tensor multiplier, double slope) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t C = xc.size(1), HW = xc.size(2) * xc.size(3);
    mul_leaky_gelu_kernel<<<132 * 32, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), multiplier.contiguous().data_ptr<float>(), y.data_ptr<float>(),
        xc.numel(), C, HW, (float)slope);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

fused_ext = load_inline(
    name="mul_leaky_gelu",
    cpp_sources="torch::Tensor mul_leaky_gelu(torch::Tensor x, torch::Tensor multiplier, double slope);",
    cuda_sources=fused_source,
    functions=["mul_leaky_gelu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU()

    def forward(self, x):
        x = self.conv(x)
        return fused_ext.mul_leaky_gelu(x, self.multiplier, self.leaky_relu.negative_slope)
