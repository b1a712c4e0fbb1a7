# task: level2/67_Conv2d_GELU_GlobalAvgPool.py
# expect: ok
# mode: gpu
# torch's Conv2d, then one CUDA block per (image, channel) that applies the
# exact GELU to every pixel of the plane and averages them (warp shuffles,
# then shared memory across warps): GELU + global average pool + the two
# squeezes in one kernel, output (batch, channels).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor gelu_global_avg(torch::Tensor y);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

constexpr int kThreads = 256;

__global__ void gelu_global_avg_kernel(const float* __restrict__ y, float* __restrict__ out,
                                       int64_t plane, float inv_plane) {
    const float* base = y + (int64_t)blockIdx.x * plane;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < plane; i += kThreads) {
        const float v = base[i];
        acc += v * 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    __shared__ float warp_sums[kThreads / 32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        float v = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            v += __shfl_down_sync(0xffffffffu, v, offset);
        }
        if (lane == 0) out[blockIdx.x] = v * inv_plane;
    }
}

torch::Tensor gelu_global_avg(torch::Tensor y) {
    TORCH_CHECK(y.is_cuda(), "gelu_global_avg: CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "gelu_global_avg: float32 expected");
    TORCH_CHECK(y.dim() == 4, "gelu_global_avg: NCHW input expected");
    torch::Tensor yc = y.contiguous();
    const int64_t batch = yc.size(0);
    const int64_t channels = yc.size(1);
    const int64_t plane = yc.size(2) * yc.size(3);
    torch::Tensor out = torch::empty({batch, channels}, yc.options());
    const int64_t planes = batch * channels;
    if (planes == 0) return out;
    TORCH_CHECK(plane > 0, "gelu_global_avg: empty plane");
    const float inv_plane = (float)(1.0 / (double)plane);
    gelu_global_avg_kernel<<<(unsigned int)planes, kThreads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), plane, inv_plane);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "gelu_global_avg: kernel launch failed");
    return out;
}
"""

pool_ext = load_inline(
    name="gelu_global_avg_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu_global_avg"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return pool_ext.gelu_global_avg(self.conv(x))
