# task: level2/94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py
# expect: ok
# mode: gpu
# torch's Linear, then one warp per GroupNorm group (256 groups of 32
# features, a lane per feature): + bias, Hardtanh(-1, 1), Mish
# (x * tanh(softplus(x))), then the group's mean and biased variance by
# warp shuffles (two passes) and the affine. AT_DISPATCH_FLOATING_TYPES,
# CHECK_INPUT macros, device assert on the group size, <cassert>/<cstdio>.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor bias_hardtanh_mish_groupnorm(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma,
                                           torch::Tensor beta, int64_t groups, double eps);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cassert>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

template <typename scalar_t>
__device__ __forceinline__ scalar_t warp_sum(scalar_t v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <typename scalar_t>
__device__ __forceinline__ scalar_t mish(scalar_t x) {
    const scalar_t sp = x > scalar_t(20) ? x : log1p(exp(x));
    return x * tanh(sp);
}

template <typename scalar_t>
__global__ void bias_hardtanh_mish_gn_kernel(const scalar_t* __restrict__ y, const scalar_t* __restrict__ bias,
                                             const scalar_t* __restrict__ gamma, const scalar_t* __restrict__ beta,
                                             scalar_t* __restrict__ out, int64_t n_groups_total, int64_t C,
                                             int group_size, scalar_t eps) {
    assert(group_size == 32);
    const int lane = threadIdx.x & 31;
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;  // one warp per group
    if (g >= n_groups_total) return;  // whole warps leave together
    const int64_t i = g * 32 + lane;
    const int64_t c = i % C;
    scalar_t v = y[i] + bias[c];
    v = v < scalar_t(-1) ? scalar_t(-1) : (v > scalar_t(1) ? scalar_t(1) : v);
    v = mish(v);
    const scalar_t mean = warp_sum(v) / scalar_t(32);
    const scalar_t d = v - mean;
    const scalar_t var = warp_sum(d * d) / scalar_t(32);
    out[i] = d / sqrt(var + eps) * gamma[c] + beta[c];
}

torch::Tensor bias_hardtanh_mish_groupnorm(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma,
                                           torch::Tensor beta, int64_t groups, double eps) {
    CHECK_INPUT(y); CHECK_INPUT(bias); CHECK_INPUT(gamma); CHECK_INPUT(beta);
    TORCH_CHECK(y.dim() == 2, "(batch, features) expected");
    const int64_t C = y.size(1);
    TORCH_CHECK(groups > 0 && C % groups == 0, "features must divide into groups");
    const int group_size = (int)(C / groups);
    TORCH_CHECK(group_size == 32, "this kernel maps one group of 32 features to one warp");
    auto out = torch::empty_like(y);
    const int64_t n_groups_total = y.size(0) * groups;
    if (n_groups_total == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n_groups_total * 32 + threads - 1) / threads;
    AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "bias_hardtanh_mish_gn_kernel", ([&] {
        bias_hardtanh_mish_gn_kernel<scalar_t><<<(unsigned)blocks, threads>>>(
            y.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), gamma.data_ptr<scalar_t>(),
            beta.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n_groups_total, C, group_size,
            (scalar_t)eps);
    }));
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("bias_hardtanh_mish_gn_kernel: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "bias_hardtanh_mish_gn_kernel failed");
    }
    return out;
}
"""

fused = load_inline(
    name="gemm_hardtanh_mish_gn",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["bias_hardtanh_mish_groupnorm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape, num_groups):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.hardtanh = nn.Hardtanh()
        self.mish = nn.Mish()
        self.groupnorm = nn.GroupNorm(num_groups=num_groups, num_channels=out_features)

    def forward(self, x):
        y = self.gemm(x).contiguous()
        return fused.bias_hardtanh_mish_groupnorm(y, self.bias.contiguous(), self.groupnorm.weight,
                                                  self.groupnorm.bias, self.groupnorm.num_groups,
                                                  self.groupnorm.eps)
