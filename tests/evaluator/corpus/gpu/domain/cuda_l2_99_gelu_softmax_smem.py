# task: level2/99_Matmul_GELU_Softmax.py
# expect: ok
# mode: gpu
# torch's Linear, then exact GELU and the row softmax in one CUDA kernel:
# a block per row caches the row's GELU values in dynamic shared memory
# (8192 floats = 32 KiB), so the row is read from global memory once; the
# max and the sum use warp-shuffle reductions; the output is
# exp(g - max) / sum. CHECK_INPUT, <cfloat>, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_softmax_cpp = "torch::Tensor gelu_softmax(torch::Tensor y);"

gelu_softmax_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cfloat>
#include <cmath>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 256;

__device__ __forceinline__ float gelu_erf(float v) {
    return v * 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
}

__device__ float block_reduce(float v, bool is_max, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? scratch[lane] : (is_max ? -FLT_MAX : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    return v;
}

__global__ void gelu_softmax_kernel(const float* __restrict__ y, float* __restrict__ out, int cols) {
    extern __shared__ float row[];
    __shared__ float scratch[kThreads / 32];
    const float* yr = y + (int64_t)blockIdx.x * cols;
    float* orow = out + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += kThreads) {
        const float g = gelu_erf(yr[c]);
        row[c] = g;
        m = fmaxf(m, g);
    }
    m = block_reduce(m, true, scratch);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += kThreads) {
        const float e = expf(row[c] - m);
        row[c] = e;
        s += e;
    }
    s = block_reduce(s, false, scratch);
    for (int c = threadIdx.x; c < cols; c += kThreads) orow[c] = row[c] / s;
}

torch::Tensor gelu_softmax(torch::Tensor y) {
    CHECK_INPUT(y);
    TORCH_CHECK(y.dim() == 2 && y.scalar_type() == torch::kFloat32, "(rows, cols) float32 expected");
    const int64_t rows = y.size(0), cols = y.size(1);
    TORCH_CHECK(cols <= 12288, "the row must fit in 48 KiB of shared memory");
    auto out = torch::empty_like(y);
    if (rows == 0 || cols == 0) return out;
    const size_t smem = (size_t)cols * sizeof(float);
    gelu_softmax_kernel<<<(unsigned)rows, kThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), out.data_ptr<float>(), (int)cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

gelu_softmax_ext = load_inline(
    name="gelu_softmax_smem",
    cpp_sources=gelu_softmax_cpp,
    cuda_sources=gelu_softmax_cuda,
    functions=["gelu_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return gelu_softmax_ext.gelu_softmax(self.linear(x).contiguous())
