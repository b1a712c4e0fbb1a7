# task: level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py
# expect: ok
# mode: gpu
# torch's Linear, then one CUDA kernel for the whole tail:
# swish, / 2, clamp(-1, 1), tanh, clamp(-1, 1).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor swish_clamp_tanh(torch::Tensor y);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float clamp_unit(float v) {
    return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
}

__global__ void swish_clamp_tanh_kernel(const float* __restrict__ y, float* __restrict__ out,
                                        int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = y[i];
        float s = v * (1.0f / (1.0f + expf(-v)));   // x * sigmoid(x)
        s = s * 0.5f;                               // x / 2.0
        s = clamp_unit(s);
        s = tanhf(s);
        out[i] = clamp_unit(s);
    }
}

torch::Tensor swish_clamp_tanh(torch::Tensor y) {
    TORCH_CHECK(y.is_cuda(), "swish_clamp_tanh: CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "swish_clamp_tanh: float32 expected");
    torch::Tensor yc = y.contiguous();
    torch::Tensor out = torch::empty_like(yc);
    const int64_t n = yc.numel();
    if (n == 0) return out;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535 * 16) blocks = 65535 * 16;
    swish_clamp_tanh_kernel<<<(unsigned int)blocks, threads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "swish_clamp_tanh: kernel launch failed");
    return out;
}
"""

tail_ext = load_inline(
    name="swish_clamp_tanh_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["swish_clamp_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return tail_ext.swish_clamp_tanh(self.gemm(x))
