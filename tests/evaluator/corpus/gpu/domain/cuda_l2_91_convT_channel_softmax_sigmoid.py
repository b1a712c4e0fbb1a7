# task: level2/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid.py
# expect: ok
# mode: gpu
# torch's ConvTranspose2d, then softmax over the 128 channels of every
# pixel, + bias[c], * scaling_factor, sigmoid, in one CUDA kernel. A thread
# owns one (sample, pixel) and walks the channels with stride H*W, so a
# warp reads 32 adjacent pixels of a channel per step: an online
# (max, sum) sweep, then a sweep that writes the result. CHECK_INPUT
# macros, <cfloat>/<cstdio>, device assert, printf on launch errors.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

chsm_cpp = "torch::Tensor channel_softmax_bias_scale_sigmoid(torch::Tensor x, torch::Tensor bias, double scale);"

chsm_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__global__ void channel_softmax_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ y, int64_t N, int C, int64_t HW, float scale) {
    assert(C > 0);
    const int64_t total = N * HW;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = t / HW;
        const int64_t p = t - n * HW;
        const float* xp = x + n * C * HW + p;
        float* yp = y + n * C * HW + p;
        float m = -FLT_MAX, s = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float v = xp[(int64_t)c * HW];
            if (v > m) {
                s = s * expf(m - v) + 1.0f;
                m = v;
            } else {
                s += expf(v - m);
            }
        }
        for (int c = 0; c < C; ++c) {
            const float sm = expf(xp[(int64_t)c * HW] - m) / s;
            const float z = (sm + bias[c]) * scale;
            yp[(int64_t)c * HW] = 1.0f / (1.0f + expf(-z));
        }
    }
}

torch::Tensor channel_softmax_bias_scale_sigmoid(torch::Tensor x, torch::Tensor bias, double scale) {
    CHECK_INPUT(x);
    CHECK_INPUT(bias);
    TORCH_CHECK(x.dim() == 4 && x.scalar_type() == torch::kFloat32, "NCHW float32 expected");
    TORCH_CHECK(bias.numel() == x.size(1), "one bias per channel expected");
    auto y = torch::empty_like(x);
    const int64_t N = x.size(0), HW = x.size(2) * x.size(3);
    const int C = (int)x.size(1);
    if (N * HW == 0 || C == 0) return y;
    const int threads = 256;
    int64_t blocks = (N * HW + threads - 1) / threads;
    if (blocks > 132 * 32) blocks = 132 * 32;
    channel_softmax_kernel<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), bias.data_ptr<float>(),
                                                          y.data_ptr<float>(), N, C, HW, (float)scale);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("channel_softmax_kernel: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "channel_softmax_kernel failed: ", cudaGetErrorString(err));
    }
    return y;
}
"""

chsm_ext = load_inline(
    name="convT_channel_softmax_sigmoid",
    cpp_sources=chsm_cpp,
    cuda_sources=chsm_cuda,
    functions=["channel_softmax_bias_scale_sigmoid"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding,
                 bias_shape, scaling_factor):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()
        return chsm_ext.channel_softmax_bias_scale_sigmoid(x, self.bias.contiguous(),
                                                           float(self.scaling_factor))
