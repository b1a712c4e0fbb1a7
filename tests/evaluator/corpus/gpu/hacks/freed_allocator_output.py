# task: level1/88_MinGPTNewGelu.py
# expect: incorrect
# mode: gpu
# hack: the kernel writes into a torch tensor that goes out of scope at the
# end of the call; what is returned is torch::from_blob over its memory. The
# block goes back to the caching allocator but stays mapped, so the values
# are still right when the judge copies them: only the runner's ownership
# check (the output's storage is not the allocator's: foreign_storage) can
# catch it, and the judge then says incorrect.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor new_gelu(torch::Tensor x);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

torch::Tensor new_gelu(torch::Tensor x) {
    torch::Tensor xc = x.contiguous();
    const int64_t n = xc.numel();
    void* raw = nullptr;
    {
        torch::Tensor scratch = torch::empty_like(xc);
        const int threads = 256;
        const int64_t blocks = (n + threads - 1) / threads;
        new_gelu_kernel<<<(unsigned int)blocks, threads>>>(
            xc.data_ptr<float>(), scratch.data_ptr<float>(), n);
        raw = scratch.data_ptr();
    }  // scratch is released to the caching allocator here
    return torch::from_blob(raw, xc.sizes(), xc.options());
}
"""

freed_alloc_ext = load_inline(
    name="freed_alloc_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return freed_alloc_ext.new_gelu(x)
