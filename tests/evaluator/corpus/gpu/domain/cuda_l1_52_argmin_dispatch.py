# task: level1/52_Argmin_over_a_dimension.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (128 x 4096 x 4095 fp32: 8 GiB in; int64 out)
# argmin over a middle dimension: the tensor is seen as (outer, R, inner)
# and each thread owns one (outer, inner) output, walking R with stride
# inner, so a warp reads 32 consecutive floats per step. Strict '<' keeps
# the first occurrence of a tie, as torch.argmin does. int64 output,
# AT_DISPATCH_FLOATING_TYPES, CHECK_INPUT, a device-side assert, <cassert>.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

argmin_cpp = "torch::Tensor argmin_dim(torch::Tensor x, int64_t dim);"

argmin_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cassert>
#include <cfloat>
#include <cstdio>
#include <vector>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

template <typename scalar_t>
__global__ void argmin_dim_kernel(const scalar_t* __restrict__ x, int64_t* __restrict__ out,
                                  int64_t outer, int64_t R, int64_t inner) {
    assert(R > 0);
    const int64_t total = outer * inner;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = idx / inner;
        const int64_t c = idx - o * inner;
        const scalar_t* p = x + o * R * inner + c;
        scalar_t best = p[0];
        int64_t best_i = 0;
#pragma unroll 4
        for (int64_t r = 1; r < R; ++r) {
            const scalar_t v = p[r * inner];
            if (v < best) {
                best = v;
                best_i = r;
            }
        }
        out[idx] = best_i;
    }
}

torch::Tensor argmin_dim(torch::Tensor x, int64_t dim) {
    CHECK_INPUT(x);
    const int64_t nd = x.dim();
    TORCH_CHECK(nd > 0, "argmin_dim: a tensor with at least one dimension expected");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "argmin_dim: dim out of range");
    TORCH_CHECK(x.size(dim) > 0, "argmin_dim: cannot reduce an empty dimension");
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> out_sizes;
    for (int64_t d = 0; d < nd; ++d) {
        if (d < dim) outer *= x.size(d);
        if (d > dim) inner *= x.size(d);
        if (d != dim) out_sizes.push_back(x.size(d));
    }
    const int64_t R = x.size(dim);
    auto out = torch::empty(out_sizes, x.options().dtype(torch::kLong));
    const int64_t total = outer * inner;
    if (total == 0) return out;
    const int threads = 256;
    int64_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "argmin_dim_kernel", ([&] {
        argmin_dim_kernel<scalar_t><<<(unsigned)blocks, threads>>>(
            x.data_ptr<scalar_t>(), out.data_ptr<int64_t>(), outer, R, inner);
    }));
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("argmin_dim_kernel launch error: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "argmin_dim_kernel launch error: ", cudaGetErrorString(err));
    }
    return out;
}
"""

argmin_ext = load_inline(
    name="argmin_dim_dispatch",
    cpp_sources=argmin_cpp,
    cuda_sources=argmin_cuda,
    functions=["argmin_dim"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return argmin_ext.argmin_dim(x.contiguous(), self.dim)
