# task: level2/13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py
# expect: ok
# mode: gpu
# torch's ConvTranspose3d, then in one CUDA kernel: the mean over depth,
# + bias[c], softmax over the 64 channels, tanh and the scaling. A thread
# owns one (sample, h, w) column: it averages the 32 depth values of each
# channel (coalesced across the warp's adjacent pixels), keeps the 64
# biased means in registers, and writes the (B, C, 1, H, W) output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor depthmean_softmax_tanh(torch::Tensor x, torch::Tensor bias, double scale);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cfloat>
#include <cmath>

constexpr int kMaxC = 64;

__global__ void depthmean_softmax_tanh_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                              float* __restrict__ y, int64_t B, int C, int64_t D,
                                              int64_t HW, float scale) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= B * HW) return;
    const int64_t b = t / HW;
    const int64_t p = t - b * HW;
    float v[kMaxC];
    float m = -FLT_MAX;
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) {
        if (c < C) {
            const float* xc = x + ((b * C + c) * D) * HW + p;
            float s = 0.0f;
            for (int64_t d = 0; d < D; ++d) s += xc[d * HW];
            v[c] = s / (float)D + bias[c];
            m = fmaxf(m, v[c]);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) {
        if (c < C) {
            v[c] = expf(v[c] - m);
            sum += v[c];
        }
    }
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) {
        if (c < C) y[(b * C + c) * HW + p] = tanhf(v[c] / sum) * scale;
    }
}

torch::Tensor depthmean_softmax_tanh(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    TORCH_CHECK(bias.is_cuda() && bias.is_contiguous(), "bias must be a contiguous CUDA tensor");
    TORCH_CHECK(x.dim() == 5 && x.scalar_type() == torch::kFloat32, "(B, C, D, H, W) float32 expected");
    const int64_t B = x.size(0), D = x.size(2), HW = x.size(3) * x.size(4);
    const int C = (int)x.size(1);
    TORCH_CHECK(C <= kMaxC, "at most ", kMaxC, " channels");
    TORCH_CHECK(bias.numel() == C, "one bias per channel expected");
    TORCH_CHECK(D > 0, "empty depth");
    auto y = torch::empty({B, C, 1, x.size(3), x.size(4)}, x.options());
    if (B * HW == 0) return y;
    const int threads = 128;
    const int64_t blocks = (B * HW + threads - 1) / threads;
    depthmean_softmax_tanh_kernel<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), B, C, D, HW, (float)scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

fused_ext = load_inline(
    name="convT3d_depthmean_softmax_tanh",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["depthmean_softmax_tanh"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scaling_factor):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.bias = nn.Parameter(torch.randn(1, out_channels, 1, 1, 1))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()
        return fused_ext.depthmean_softmax_tanh(x, self.bias.contiguous(), float(self.scaling_factor))
