# task: level2/15_ConvTranspose3d_BatchNorm_Subtract.py
# expect: ok
# mode: gpu
# torch's ConvTranspose3d, then training-mode BatchNorm3d and the
# subtraction of each (sample, channel) volume's spatial mean, with a block
# per volume throughout: kernel 1 sums each volume, kernel 2 turns the
# sums into the channel means and sums each volume's squared deviations,
# kernel 3 forms the channel's biased variance, normalises the volume
# (affine included), averages the normalised values and writes them minus
# that average. Partial sums are reduced in double. CHECK_INPUT,
# <cmath>/<cstdio>, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bn_sub_cpp = "torch::Tensor bn_subtract_spatial_mean(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

bn_sub_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 512;

__device__ double block_sum(double v) {
    __shared__ double warp_part[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    double t = lane < kThreads / 32 ? warp_part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    __syncthreads();
    return t;  // every thread holds the block's sum
}

__global__ void volume_sum_kernel(const float* __restrict__ x, double* __restrict__ vsum, int64_t S) {
    const float* p = x + (int64_t)blockIdx.x * S;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < S; i += kThreads) s += p[i];
    const double t = block_sum((double)s);
    if (threadIdx.x == 0) vsum[blockIdx.x] = t;
}

__device__ float channel_mean(const double* vsum, int c, int N, int C, int64_t S) {
    double t = 0.0;
    for (int n = 0; n < N; ++n) t += vsum[(int64_t)n * C + c];
    return (float)(t / ((double)N * (double)S));
}

__global__ void volume_sqdev_kernel(const float* __restrict__ x, const double* __restrict__ vsum,
                                    double* __restrict__ vsq, int N, int C, int64_t S) {
    const int c = blockIdx.x % C;
    const float mean = channel_mean(vsum, c, N, C, S);
    const float* p = x + (int64_t)blockIdx.x * S;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < S; i += kThreads) {
        const float d = p[i] - mean;
        q += d * d;
    }
    const double t = block_sum((double)q);
    if (threadIdx.x == 0) vsq[blockIdx.x] = t;
}

__global__ void bn_subtract_mean_kernel(const float* __restrict__ x, const double* __restrict__ vsum,
                                        const double* __restrict__ vsq, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ y,
                                        int N, int C, int64_t S, float eps) {
    const int c = blockIdx.x % C;
    const float mean = channel_mean(vsum, c, N, C, S);
    double q = 0.0;
    for (int n = 0; n < N; ++n) q += vsq[(int64_t)n * C + c];
    const float var = (float)(q / ((double)N * (double)S));
    const float invstd = 1.0f / sqrtf(var + eps);
    const float wc = w[c], bc = b[c];
    const float* p = x + (int64_t)blockIdx.x * S;
    float* o = y + (int64_t)blockIdx.x * S;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < S; i += kThreads) s += (p[i] - mean) * invstd * wc + bc;
    const float vmean = (float)(block_sum((double)s) / (double)S);
    for (int64_t i = threadIdx.x; i < S; i += kThreads) o[i] = ((p[i] - mean) * invstd * wc + bc) - vmean;
}

torch::Tensor bn_subtract_spatial_mean(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    CHECK_INPUT(x); CHECK_INPUT(weight); CHECK_INPUT(bias);
    TORCH_CHECK(x.dim() == 5 && x.scalar_type() == torch::kFloat32, "(N, C, D, H, W) float32 expected");
    const int N = (int)x.size(0), C = (int)x.size(1);
    const int64_t S = x.size(2) * x.size(3) * x.size(4);
    auto y = torch::empty_like(x);
    if ((int64_t)N * C == 0 || S == 0) return y;
    auto vsum = torch::empty({(int64_t)N * C}, x.options().dtype(torch::kFloat64));
    auto vsq = torch::empty({(int64_t)N * C}, x.options().dtype(torch::kFloat64));
    const unsigned blocks = (unsigned)(N * C);
    auto stream = at::cuda::getCurrentCUDAStream();
    volume_sum_kernel<<<blocks, kThreads, 0, stream>>>(x.data_ptr<float>(), vsum.data_ptr<double>(), S);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    volume_sqdev_kernel<<<blocks, kThreads, 0, stream>>>(x.data_ptr<float>(), vsum.data_ptr<double>(),
                                                         vsq.data_ptr<double>(), N, C, S);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    bn_subtract_mean_kernel<<<blocks, kThreads, 0, stream>>>(
        x.data_ptr<float>(), vsum.data_ptr<double>(), vsq.data_ptr<double>(), weight.data_ptr<float>(),
        bias.data_ptr<float>(), y.data_ptr<float>(), N, C, S, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

bn_sub = load_inline(
    name="convT3d_bn_subtract_mean",
    cpp_sources=bn_sub_cpp,
    cuda_sources=bn_sub_cuda,
    functions=["bn_subtract_spatial_mean"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()
        return bn_sub.bn_subtract_spatial_mean(x, self.batch_norm.weight, self.batch_norm.bias,
                                               self.batch_norm.eps)
