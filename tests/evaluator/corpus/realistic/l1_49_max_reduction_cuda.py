# task: level1/49_Max_reduction_over_a_dimension
# style: CUDA load_inline; <cfloat> FLT_MAX; reduced shape computed in C++ with std::vector
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

max_reduce_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cfloat>
#include <vector>

__global__ void max_dim_kernel(const float* __restrict__ x, float* __restrict__ out,
                               int64_t outer, int64_t reduce, int64_t inner) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    const int64_t o = idx / inner;
    const int64_t i = idx - o * inner;
    const float* p = x + o * reduce * inner + i;
    float best = -FLT_MAX;
    for (int64_t r = 0; r < reduce; ++r) best = fmaxf(best, p[r * inner]);
    out[idx] = best;
}

torch::Tensor max_dim(torch::Tensor x, int64_t dim) {
    auto xc = x.contiguous();
    if (dim < 0) dim += xc.dim();
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> out_shape;
    for (int64_t d = 0; d < xc.dim(); ++d) {
        if (d < dim) outer *= xc.size(d);
        if (d > dim) inner *= xc.size(d);
        if (d != dim) out_shape.push_back(xc.size(d));
    }
    auto out = torch::empty(out_shape, xc.options());
    const int64_t total = outer * inner;
    const int threads = 256;
    max_dim_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), outer, xc.size(dim), inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

max_reduce = load_inline(
    name="max_reduce",
    cpp_sources="torch::Tensor max_dim(torch::Tensor x, int64_t dim);",
    cuda_sources=max_reduce_src,
    functions=["max_dim"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_reduce.max_dim(x, self.dim)
