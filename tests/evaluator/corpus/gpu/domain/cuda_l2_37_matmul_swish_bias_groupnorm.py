# task: level2/37_Matmul_Swish_Sum_GroupNorm.py
# expect: ok
# mode: gpu
# torch's Linear, then sigmoid(x) * x + bias and GroupNorm (64 groups of
# 64 features) in one CUDA kernel: a warp per group, each lane holding two
# adjacent features loaded as one float2, the group mean and biased
# variance by butterfly shuffles, then the affine, stored as float2.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

swish_gn_cpp = "torch::Tensor swish_bias_groupnorm64(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps);"

swish_gn_cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cmath>

__device__ __forceinline__ float warp_allsum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float swish_bias(float x, float b) {
    const float s = 1.0f / (1.0f + expf(-x));
    return s * x + b;
}

__global__ void swish_bias_gn64_kernel(const float2* __restrict__ y, const float2* __restrict__ bias,
                                       const float2* __restrict__ gamma, const float2* __restrict__ beta,
                                       float2* __restrict__ out, int64_t n_groups_total, int64_t C2) {
    const int lane = threadIdx.x & 31;
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (g >= n_groups_total) return;
    const int64_t i2 = g * 32 + lane;   // float2 index: features 2*i2 and 2*i2 + 1
    const int64_t c2 = i2 % C2;
    const float2 v = y[i2];
    const float2 bb = bias[c2];
    const float a0 = swish_bias(v.x, bb.x);
    const float a1 = swish_bias(v.y, bb.y);
    const float mean = warp_allsum(a0 + a1) * (1.0f / 64.0f);
    const float d0 = a0 - mean, d1 = a1 - mean;
    const float var = warp_allsum(d0 * d0 + d1 * d1) * (1.0f / 64.0f);
    const float rstd = rsqrtf(var + 1e-5f);
    const float2 gm = gamma[c2], bt = beta[c2];
    out[i2] = make_float2(d0 * rstd * gm.x + bt.x, d1 * rstd * gm.y + bt.y);
}

torch::Tensor swish_bias_groupnorm64(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma,
                                     torch::Tensor beta, int64_t groups, double eps) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.dim() == 2, "contiguous (batch, features) CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(bias.is_contiguous() && gamma.is_contiguous() && beta.is_contiguous(), "contiguous parameters expected");
    const int64_t C = y.size(1);
    TORCH_CHECK(groups > 0 && C % groups == 0 && C / groups == 64, "groups of 64 features expected");
    TORCH_CHECK(eps == 1e-5, "this kernel is specialised for eps = 1e-5");
    auto out = torch::empty_like(y);
    const int64_t n_groups_total = y.size(0) * groups;
    if (n_groups_total == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n_groups_total * 32 + threads - 1) / threads;
    swish_bias_gn64_kernel<<<(unsigned)blocks, threads>>>(
        reinterpret_cast<const float2*>(y.data_ptr<float>()), reinterpret_cast<const float2*>(bias.data_ptr<float>()),
        reinterpret_cast<const float2*>(gamma.data_ptr<float>()), reinterpret_cast<const float2*>(beta.data_ptr<float>()),
        reinterpret_cast<float2*>(out.data_ptr<float>()), n_groups_total, C / 2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

swish_gn = load_inline(
    name="swish_bias_groupnorm64",
    cpp_sources=swish_gn_cpp,
    cuda_sources=swish_gn_cuda,
    functions=["swish_bias_groupnorm64"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        y = self.matmul(x).contiguous()
        return swish_gn.swish_bias_groupnorm64(y, self.bias.contiguous(), self.group_norm.weight,
                                               self.group_norm.bias, self.group_norm.num_groups,
                                               self.group_norm.eps)
