# task: level1/89_cumsum
# style: CUDA load_inline; cub::BlockScan over tiles with a running carry; <cub/block/block_scan.cuh>
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cumsum_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cub/block/block_scan.cuh>

template <int THREADS>
__global__ void row_cumsum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    using BlockScan = cub::BlockScan<float, THREADS>;
    __shared__ typename BlockScan::TempStorage temp;
    __shared__ float carry;
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    if (threadIdx.x == 0) carry = 0.0f;
    __syncthreads();
    for (int64_t base = 0; base < cols; base += THREADS) {
        const int64_t j = base + threadIdx.x;
        float v = j < cols ? row[j] : 0.0f;
        float tile_total;
        BlockScan(temp).InclusiveSum(v, v, tile_total);
        const float c = carry;
        if (j < cols) out[j] = v + c;
        __syncthreads();
        if (threadIdx.x == 0) carry = c + tile_total;
        __syncthreads();
    }
}

torch::Tensor cumsum_lastdim(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    row_cumsum_kernel<1024><<<(unsigned)rows, 1024, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cumsum_ext = load_inline(
    name="cumsum_blockscan",
    cpp_sources="torch::Tensor cumsum_lastdim(torch::Tensor x);",
    cuda_sources=cumsum_cuda,
    functions=["cumsum_lastdim"],
    extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim in (-1, x.dim() - 1):
            return cumsum_ext.cumsum_lastdim(x)
        return cumsum_ext.cumsum_lastdim(x.transpose(self.dim, -1)).transpose(self.dim, -1)
