# task: level2/32_Conv2d_Scaling_Min
# style: CUDA load_inline; channel-wise min of (x * scale) per pixel, keepdim output; CUDART_INF_F
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_min_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <math_constants.h>

__global__ void scale_channel_min_kernel(const float* __restrict__ x, float* __restrict__ out,
                                         float scale, int64_t B, int64_t C, int64_t HW) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * HW) return;
    const int64_t b = idx / HW;
    const int64_t p = idx % HW;
    const float* base = x + b * C * HW + p;
    float m = CUDART_INF_F;
    for (int64_t c = 0; c < C; ++c) m = fminf(m, base[c * HW] * scale);
    out[idx] = m;
}

torch::Tensor scale_channel_min(torch::Tensor x, double scale) {
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    auto out = torch::empty({B, 1, H, W}, xc.options());
    const int64_t total = B * H * W;
    const int threads = 256;
    scale_channel_min_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), (float)scale, B, C, H * W);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

scale_min = load_inline(
    name="scale_channel_min",
    cpp_sources="torch::Tensor scale_channel_min(torch::Tensor x, double scale);",
    cuda_sources=scale_min_src,
    functions=["scale_channel_min"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        return scale_min.scale_channel_min(self.conv(x), self.scale_factor)
