# task: level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py
# expect: ok
# mode: gpu
# torch's Linear; the reference's InstanceNorm2d on (batch, 1, 1, features)
# normalises each row over its 8192 features (no affine). One block per row
# keeps the row in registers (32 values per thread), so it is read once:
# mean and biased variance by warp-shuffle block reductions, then
# ((x - mean) * rstd + y) * y. CHECK_INPUT, <cassert> device assert on the
# register budget, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_decl = "torch::Tensor rownorm_residual_mul(torch::Tensor x, torch::Tensor y, double eps);"

cuda_impl = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cassert>
#include <cmath>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 256;
constexpr int kItems = 32;  // up to 8192 features per row

__device__ float block_sum_bcast(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < kThreads / 32 ? scratch[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    __syncthreads();
    return t;
}

__global__ void rownorm_residual_mul_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                            float* __restrict__ out, int cols, float eps) {
    assert(cols <= kThreads * kItems);
    __shared__ float scratch[kThreads / 32];
    const int64_t base = (int64_t)blockIdx.x * cols;
    float v[kItems];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
        const int c = threadIdx.x + k * kThreads;
        v[k] = c < cols ? x[base + c] : 0.0f;
        s += v[k];
    }
    const float mean = block_sum_bcast(s, scratch) / (float)cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
        const int c = threadIdx.x + k * kThreads;
        const float d = c < cols ? v[k] - mean : 0.0f;
        q += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_sum_bcast(q, scratch) / (float)cols + eps);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
        const int c = threadIdx.x + k * kThreads;
        if (c < cols) {
            const float yy = y[base + c];
            out[base + c] = ((v[k] - mean) * rstd + yy) * yy;
        }
    }
}

torch::Tensor rownorm_residual_mul(torch::Tensor x, torch::Tensor y, double eps) {
    CHECK_INPUT(x);
    CHECK_INPUT(y);
    TORCH_CHECK(x.sizes() == y.sizes() && x.dim() == 2, "x and y must both be (batch, features)");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.size(1) <= kThreads * kItems, "at most ", kThreads * kItems, " features");
    auto out = torch::empty_like(x);
    if (x.numel() == 0) return out;
    rownorm_residual_mul_kernel<<<(unsigned)x.size(0), kThreads>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (int)x.size(1), (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

rownorm = load_inline(
    name="linear_rownorm_residual",
    cpp_sources=cpp_decl,
    cuda_sources=cuda_impl,
    functions=["rownorm_residual_mul"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        h = self.bmm(x).contiguous()
        return rownorm.rownorm_residual_mul(h, y.contiguous(), self.instance_norm.eps)
