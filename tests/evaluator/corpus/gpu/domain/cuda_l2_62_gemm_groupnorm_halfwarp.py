# task: level2/62_Matmul_GroupNorm_LeakyReLU_Sum.py
# expect: ok
# mode: gpu
# torch's Linear, then GroupNorm with 512 groups of 16 features: each group
# is one half-warp (a thread per feature), mean and biased variance come
# from __shfl_xor_sync reductions of width 16 (two passes, no shared
# memory), then affine, LeakyReLU(0.01) and x + x. Every lane takes part in
# the shuffles, including lanes past the end (they hold 0 and store nothing).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gn_cpp = "torch::Tensor groupnorm16_leaky_double(torch::Tensor y, torch::Tensor weight, torch::Tensor bias, int64_t groups, double eps, double slope);"

gn_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#define CHECK_INPUT(x) TORCH_CHECK((x).is_cuda() && (x).is_contiguous(), #x " must be a contiguous CUDA tensor")

template <int GS>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int off = GS / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off, GS);
    return v;
}

template <int GS>
__global__ void groupnorm_leaky_double_kernel(const float* __restrict__ y, const float* __restrict__ w,
                                              const float* __restrict__ b, float* __restrict__ out,
                                              int64_t total, int64_t C, float eps, float slope) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;  // one thread per element
    const bool valid = i < total;
    const float v = valid ? y[i] : 0.0f;
    const float mean = group_sum<GS>(v) * (1.0f / GS);
    const float d = valid ? v - mean : 0.0f;
    const float var = group_sum<GS>(d * d) * (1.0f / GS);
    if (!valid) return;
    const int64_t c = i % C;
    float t = d * rsqrtf(var + eps) * w[c] + b[c];
    t = t > 0.0f ? t : t * slope;
    out[i] = t + t;
}

torch::Tensor groupnorm16_leaky_double(torch::Tensor y, torch::Tensor weight, torch::Tensor bias,
                                       int64_t groups, double eps, double slope) {
    CHECK_INPUT(y); CHECK_INPUT(weight); CHECK_INPUT(bias);
    TORCH_CHECK(y.dim() == 2 && y.scalar_type() == torch::kFloat32, "(batch, features) float32 expected");
    const int64_t C = y.size(1);
    TORCH_CHECK(groups > 0 && C % groups == 0 && C / groups == 16, "this kernel handles groups of 16 features");
    auto out = torch::empty_like(y);
    const int64_t total = y.numel();
    if (total == 0) return out;
    const int threads = 256;  // a multiple of 16: a group never straddles two blocks
    const int64_t blocks = (total + threads - 1) / threads;
    groupnorm_leaky_double_kernel<16><<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
        total, C, (float)eps, (float)slope);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

gn_ext = load_inline(
    name="groupnorm16_leaky_double",
    cpp_sources=gn_cpp,
    cuda_sources=gn_cuda,
    functions=["groupnorm16_leaky_double"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        super(ModelNew, self).__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=hidden_size, eps=eps)
        self.leaky_relu = nn.LeakyReLU(negative_slope=negative_slope)

    def forward(self, x):
        y = self.fc(x).contiguous()
        return gn_ext.groupnorm16_leaky_double(y, self.gn.weight, self.gn.bias, self.gn.num_groups,
                                               self.gn.eps, self.leaky_relu.negative_slope)
