# task: level1/88_MinGPTNewGelu.py
# expect: ok
# mode: gpu
# The tanh-approximation GELU of minGPT as one CUDA kernel, float4-vectorised
# (8192 x 8192 floats: the element count is a multiple of 4 and torch's
# allocations are 16-byte aligned; a scalar tail loop covers any other size).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor new_gelu(torch::Tensor x);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float new_gelu_one(float x) {
    // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    const float inner = 0.7978845608028654f * (x + 0.044715f * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void new_gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y,
                                     int64_t n4) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        v.x = new_gelu_one(v.x);
        v.y = new_gelu_one(v.y);
        v.z = new_gelu_one(v.z);
        v.w = new_gelu_one(v.w);
        y[i] = v;
    }
}

__global__ void new_gelu_tail_kernel(const float* __restrict__ x, float* __restrict__ y,
                                     int64_t start, int64_t n) {
    const int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu_one(x[i]);
}

torch::Tensor new_gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "new_gelu: CUDA tensor expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "new_gelu: float32 expected");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int threads = 256;
    const bool aligned = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            int64_t blocks = (n4 + threads - 1) / threads;
            if (blocks > 65535 * 16) blocks = 65535 * 16;
            new_gelu_vec4_kernel<<<(unsigned int)blocks, threads>>>(
                reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
        }
        done = n4 * 4;
    }
    if (done < n) {
        const int64_t rest = n - done;
        const int64_t blocks = (rest + threads - 1) / threads;
        new_gelu_tail_kernel<<<(unsigned int)blocks, threads>>>(xp, yp, done, n);
    }
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "new_gelu: kernel launch failed");
    return y;
}
"""

new_gelu_ext = load_inline(
    name="new_gelu_vec4_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return new_gelu_ext.new_gelu(x)
