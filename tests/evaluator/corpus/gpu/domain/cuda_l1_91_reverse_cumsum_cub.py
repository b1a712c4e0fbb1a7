# task: level1/91_cumsum_reverse.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (32768 x 32768 fp32: 4 GiB in, 4 GiB out)
# Reverse cumsum (out[j] = x[j] + ... + x[n-1]) without the two flips of
# the reference: one block per row reads the row from its end, tile by
# tile, and cub::BlockScan::InclusiveSum with a running-prefix callback
# carries the total of the tiles already done.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rev_cpp = "torch::Tensor reverse_cumsum_rows(torch::Tensor x);"

rev_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cub/block/block_scan.cuh>

struct RunningPrefix {
    float total;
    __device__ explicit RunningPrefix(float t) : total(t) {}
    // called by the first warp with the tile's total; lane 0's return value is the tile's prefix
    __device__ float operator()(float tile_total) {
        const float before = total;
        total += tile_total;
        return before;
    }
};

template <int THREADS, int ITEMS>
__global__ void reverse_cumsum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    using BlockScan = cub::BlockScan<float, THREADS>;
    __shared__ typename BlockScan::TempStorage temp;
    const float* xr = x + (int64_t)blockIdx.x * cols;
    float* yr = y + (int64_t)blockIdx.x * cols;
    RunningPrefix prefix(0.0f);
    for (int64_t base = 0; base < cols; base += (int64_t)THREADS * ITEMS) {
        float items[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int64_t r = base + (int64_t)threadIdx.x * ITEMS + i;  // distance from the row's end
            items[i] = (r < cols) ? xr[cols - 1 - r] : 0.0f;
        }
        BlockScan(temp).InclusiveSum(items, items, prefix);
        __syncthreads();  // temp is reused by the next tile
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int64_t r = base + (int64_t)threadIdx.x * ITEMS + i;
            if (r < cols) yr[cols - 1 - r] = items[i];
        }
    }
}

torch::Tensor reverse_cumsum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "x must be a 2-D (rows, cols) view");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    reverse_cumsum_kernel<256, 4><<<(unsigned)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

rev_ext = load_inline(
    name="reverse_cumsum_cub",
    cpp_sources=rev_cpp,
    cuda_sources=rev_cuda,
    functions=["reverse_cumsum_rows"],
    extra_cuda_cflags=["-O3", "-std=c++17"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        y = rev_ext.reverse_cumsum_rows(xt.view(-1, xt.shape[-1]))
        return y.view(xt.shape).movedim(-1, dim)
