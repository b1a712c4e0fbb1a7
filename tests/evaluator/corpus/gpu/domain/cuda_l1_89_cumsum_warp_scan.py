# task: level1/89_cumsum.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (32768 x 32768 fp32: 4 GiB in, 4 GiB out)
# Row cumsum, one 256-thread block per row. The row is walked in tiles of
# 1024 elements; each thread scans its 4 consecutive elements serially,
# warps scan the thread totals with __shfl_up_sync, the first warp scans
# the 8 warp totals in shared memory, and a running carry joins the tiles.
# CHECK_INPUT macros, <cfloat>/<cstdio>, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scan_cpp = "torch::Tensor cumsum_rows(torch::Tensor x);"

scan_cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 256;
constexpr int kItems = 4;
constexpr int kWarps = kThreads / 32;

__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t cols) {
    __shared__ float warp_tot[kWarps];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    float carry = 0.0f;
    for (int64_t base = 0; base < cols; base += (int64_t)kThreads * kItems) {
        const int64_t first = base + (int64_t)threadIdx.x * kItems;
        float v[kItems];
        float run = 0.0f;
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
            const int64_t j = first + i;
            run += (j < cols) ? xr[j] : 0.0f;
            v[i] = run;
        }
        // inclusive scan of the per-thread totals within the warp
        float s = run;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const float other = __shfl_up_sync(0xffffffffu, s, off);
            if (lane >= off) s += other;
        }
        if (lane == 31) warp_tot[warp] = s;
        __syncthreads();
        if (warp == 0) {
            float w = (lane < kWarps) ? warp_tot[lane] : 0.0f;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const float other = __shfl_up_sync(0xffffffffu, w, off);
                if (lane >= off) w += other;
            }
            if (lane < kWarps) warp_tot[lane] = w;
        }
        __syncthreads();
        const float before = carry + (warp > 0 ? warp_tot[warp - 1] : 0.0f) + (s - run);
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
            const int64_t j = first + i;
            if (j < cols) yr[j] = before + v[i];
        }
        carry += warp_tot[kWarps - 1];
        __syncthreads();  // warp_tot is rewritten by the next tile
    }
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "cumsum_rows: float32 expected");
    TORCH_CHECK(x.dim() == 2, "cumsum_rows: a 2-D (rows, cols) view expected");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    TORCH_CHECK(rows <= 0x7fffffff, "too many rows for a 1-D grid");
    cumsum_rows_kernel<<<(unsigned)rows, kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

scan_ext = load_inline(
    name="cumsum_warp_scan",
    cpp_sources=scan_cpp,
    cuda_sources=scan_cuda,
    functions=["cumsum_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        y = scan_ext.cumsum_rows(xt.view(-1, xt.shape[-1]))
        return y.view(xt.shape).movedim(-1, dim)
