# task: level2/52_Conv2d_Activation_BatchNorm.py
# expect: ok
# mode: gpu
# torch's Conv2d, then act(x) = tanh(softplus(x)) * x and training-mode
# BatchNorm2d in CUDA. One block per channel computes the channel's batch
# mean and biased variance of act(x) (two passes over N x H x W, the
# activation recomputed, per-thread fp32 sums reduced in double); a
# grid-stride kernel recomputes act(x) and normalises. softplus follows
# torch: x itself above the threshold 20, log1p(exp(x)) below.
# CHECK_INPUT, <cmath>/<cstdio>, host printf on a launch error.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

act_bn_cpp = r"""
torch::Tensor act_channel_stats(torch::Tensor x, double eps);
torch::Tensor act_bn_apply(torch::Tensor x, torch::Tensor stats, torch::Tensor weight, torch::Tensor bias);
"""

act_bn_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 512;

__device__ __forceinline__ float act(float x) {
    const float sp = x > 20.0f ? x : log1pf(expf(x));
    return tanhf(sp) * x;
}

__device__ double block_reduce(double v, double* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const double r = sh[0];
    __syncthreads();
    return r;
}

// stats[c] = mean, stats[C + c] = 1 / sqrt(var + eps)
__global__ void act_channel_stats_kernel(const float* __restrict__ x, float* __restrict__ stats,
                                         int64_t N, int64_t C, int64_t HW, float eps) {
    __shared__ double sh[kThreads];
    const int64_t c = blockIdx.x;
    const double count = (double)(N * HW);
    float s = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
        const float* p = x + (n * C + c) * HW;
        for (int64_t i = threadIdx.x; i < HW; i += kThreads) s += act(p[i]);
    }
    const float mean = (float)(block_reduce((double)s, sh) / count);
    float q = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
        const float* p = x + (n * C + c) * HW;
        for (int64_t i = threadIdx.x; i < HW; i += kThreads) {
            const float d = act(p[i]) - mean;
            q += d * d;
        }
    }
    const float var = (float)(block_reduce((double)q, sh) / count);
    if (threadIdx.x == 0) {
        stats[c] = mean;
        stats[C + c] = 1.0f / sqrtf(var + eps);
    }
}

__global__ void act_bn_apply_kernel(const float* __restrict__ x, const float* __restrict__ stats,
                                    const float* __restrict__ w, const float* __restrict__ b,
                                    float* __restrict__ y, int64_t total, int64_t C, int64_t HW) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = (i / HW) % C;
        y[i] = (act(x[i]) - stats[c]) * stats[C + c] * w[c] + b[c];
    }
}

static void check_launch(const char* name) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) printf("kernel %s failed to launch: %s\n", name, cudaGetErrorString(err));
    TORCH_CHECK(err == cudaSuccess, name, ": ", cudaGetErrorString(err));
}

torch::Tensor act_channel_stats(torch::Tensor x, double eps) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.dim() == 4 && x.scalar_type() == torch::kFloat32, "NCHW float32 expected");
    const int64_t N = x.size(0), C = x.size(1), HW = x.size(2) * x.size(3);
    auto stats = torch::empty({2, C}, x.options());
    if (C == 0) return stats;
    act_channel_stats_kernel<<<(unsigned)C, kThreads>>>(x.data_ptr<float>(), stats.data_ptr<float>(),
                                                        N, C, HW, (float)eps);
    check_launch("act_channel_stats_kernel");
    return stats;
}

torch::Tensor act_bn_apply(torch::Tensor x, torch::Tensor stats, torch::Tensor weight, torch::Tensor bias) {
    CHECK_INPUT(x); CHECK_INPUT(stats); CHECK_INPUT(weight); CHECK_INPUT(bias);
    auto y = torch::empty_like(x);
    const int64_t total = x.numel();
    if (total == 0) return y;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 132 * 64) blocks = 132 * 64;
    act_bn_apply_kernel<<<(unsigned)blocks, 256>>>(x.data_ptr<float>(), stats.data_ptr<float>(),
                                                   weight.data_ptr<float>(), bias.data_ptr<float>(),
                                                   y.data_ptr<float>(), total, x.size(1),
                                                   x.size(2) * x.size(3));
    check_launch("act_bn_apply_kernel");
    return y;
}
"""

act_bn = load_inline(
    name="conv_act_batchnorm",
    cpp_sources=act_bn_cpp,
    cuda_sources=act_bn_cuda,
    functions=["act_channel_stats", "act_bn_apply"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels, eps=eps, momentum=momentum)

    def forward(self, x):
        x = self.conv(x).contiguous()
        stats = act_bn.act_channel_stats(x, self.bn.eps)
        return act_bn.act_bn_apply(x, stats, self.bn.weight, self.bn.bias)
