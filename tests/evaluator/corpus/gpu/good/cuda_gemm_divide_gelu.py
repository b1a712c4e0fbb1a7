# task: level2/86_Matmul_Divide_GELU.py
# expect: ok
# mode: gpu
# torch's Linear, then a CUDA kernel fusing the division by a scalar and the
# exact (erf) GELU. torch divides by a scalar as a multiplication by its
# float reciprocal; the kernel does the same, and writes GELU in torch's
# order, x * 0.5 * (1 + erf(x / sqrt(2))).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor divide_gelu(torch::Tensor y, double divisor);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void divide_gelu_kernel(const float* __restrict__ y, float* __restrict__ out,
                                   float inv_divisor, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = y[i] * inv_divisor;
        out[i] = v * 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
    }
}

torch::Tensor divide_gelu(torch::Tensor y, double divisor) {
    TORCH_CHECK(y.is_cuda(), "divide_gelu: CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "divide_gelu: float32 expected");
    torch::Tensor yc = y.contiguous();
    torch::Tensor out = torch::empty_like(yc);
    const int64_t n = yc.numel();
    if (n == 0) return out;
    const float inv_divisor = 1.0f / (float)divisor;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535 * 16) blocks = 65535 * 16;
    divide_gelu_kernel<<<(unsigned int)blocks, threads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), inv_divisor, n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "divide_gelu: kernel launch failed");
    return out;
}
"""

gelu_ext = load_inline(
    name="divide_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["divide_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return gelu_ext.divide_gelu(self.linear(x), float(self.divisor))
