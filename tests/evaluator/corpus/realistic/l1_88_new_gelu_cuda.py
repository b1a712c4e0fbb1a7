# task: level1/88_MinGPTNewGelu
# style: CUDA load_inline; tanh GELU with CUDART_SQRT_2_OVER_PI_F; `import math` for the Python-side constant check
import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

new_gelu_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <math_constants.h>

__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        const float inner = CUDART_SQRT_2_OVER_PI_F * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

torch::Tensor new_gelu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    new_gelu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

new_gelu_ext = load_inline(
    name="new_gelu_ext",
    cpp_sources="torch::Tensor new_gelu(torch::Tensor x);",
    cuda_sources=new_gelu_source,
    functions=["new_gelu"],
    extra_cuda_cflags=["-O3"],
)

# The kernel hard-codes sqrt(2/pi); keep it honest.
assert abs(math.sqrt(2.0 / math.pi) - 0.797884561) < 1e-8


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        return new_gelu_ext.new_gelu(x)
