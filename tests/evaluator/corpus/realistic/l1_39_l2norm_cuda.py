# task: level1/39_L2Norm_
# style: CUDA load_inline; warp-shuffle block reduction; rsqrt-free (divides by the norm like the reference)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_l2_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <int THREADS>
__global__ void l2norm_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
        const float v = row[j];
        s += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    __shared__ float warp_part[THREADS / 32];
    __shared__ float norm;
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < THREADS / 32; ++w) t += warp_part[w];
        norm = sqrtf(t);
    }
    __syncthreads();
    const float n = norm;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) out[j] = row[j] / n;
}

torch::Tensor l2_normalize(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(1);
    l2norm_rows<256><<<(unsigned)xc.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_l2 = load_inline(
    name="l2norm_rows",
    cpp_sources="torch::Tensor l2_normalize(torch::Tensor x);",
    cuda_sources=_l2_src,
    functions=["l2_normalize"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _l2.l2_normalize(x)
