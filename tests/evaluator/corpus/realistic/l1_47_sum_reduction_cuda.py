# task: level1/47_Sum_reduction_over_a_dimension
# style: CUDA load_inline; (outer, reduce, inner) view so any dim works; keepdim output shape built in Python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_dim_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ out,
                               int64_t outer, int64_t reduce, int64_t inner) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    const int64_t o = idx / inner;
    const int64_t i = idx % inner;
    const float* p = x + o * reduce * inner + i;
    float acc = 0.0f;
    for (int64_t r = 0; r < reduce; ++r) acc += p[r * inner];
    out[idx] = acc;
}

torch::Tensor sum_dim(torch::Tensor x, int64_t outer, int64_t reduce, int64_t inner) {
    auto xc = x.contiguous();
    auto out = torch::empty({outer * inner}, xc.options());
    const int threads = 256;
    const int64_t total = outer * inner;
    if (total > 0) {
        sum_dim_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

sum_dim_ext = load_inline(
    name="sum_dim_ext",
    cpp_sources="torch::Tensor sum_dim(torch::Tensor x, int64_t outer, int64_t reduce, int64_t inner);",
    cuda_sources=sum_dim_source,
    functions=["sum_dim"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        inner = 1
        for s in x.shape[dim + 1:]:
            inner *= s
        out = sum_dim_ext.sum_dim(x, outer, x.shape[dim], inner)
        shape = list(x.shape)
        shape[dim] = 1
        return out.view(shape)
