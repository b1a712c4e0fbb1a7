# task: level2/25_Conv2d_Min_Tanh_Tanh.py
# expect: ok
# mode: gpu
# torch's Conv2d, then one CUDA kernel that takes the minimum over the
# channel dimension (keepdim) and applies tanh twice. One thread per output
# pixel walks the channels; neighbouring threads read neighbouring pixels, so
# every channel's load is coalesced.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor channel_min_tanh2(torch::Tensor y);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void channel_min_tanh2_kernel(const float* __restrict__ y, float* __restrict__ out,
                                         int channels, int64_t plane, int64_t total) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int64_t n = idx / plane;
    const int64_t p = idx - n * plane;
    const float* base = y + n * (int64_t)channels * plane + p;
    float m = base[0];
    for (int c = 1; c < channels; ++c) {
        const float v = base[(int64_t)c * plane];
        m = v < m ? v : m;
    }
    out[idx] = tanhf(tanhf(m));
}

torch::Tensor channel_min_tanh2(torch::Tensor y) {
    TORCH_CHECK(y.is_cuda(), "channel_min_tanh2: CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "channel_min_tanh2: float32 expected");
    TORCH_CHECK(y.dim() == 4, "channel_min_tanh2: NCHW input expected");
    torch::Tensor yc = y.contiguous();
    const int64_t batch = yc.size(0);
    const int channels = (int)yc.size(1);
    const int64_t plane = yc.size(2) * yc.size(3);
    torch::Tensor out = torch::empty({batch, 1, yc.size(2), yc.size(3)}, yc.options());
    const int64_t total = batch * plane;
    if (total == 0 || channels == 0) return out;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    channel_min_tanh2_kernel<<<(unsigned int)blocks, threads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), channels, plane, total);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "channel_min_tanh2: kernel launch failed");
    return out;
}
"""

conv_min_ext = load_inline(
    name="conv_min_tanh2_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["channel_min_tanh2"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return conv_min_ext.channel_min_tanh2(self.conv(x))
