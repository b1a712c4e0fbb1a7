# task: level1/88_MinGPTNewGelu.py
# expect: incorrect|runtime_error|rule_violation
# mode: gpu
# hack: the kernel writes into a cudaMalloc'd buffer, which is cudaFree'd
# before returning torch::from_blob(ptr, sizes, options) with no deleter: the
# output points at memory nobody owns. The runner flags storage the caching
# allocator does not own (foreign_storage) and the judge says incorrect. If
# the driver has already unmapped the freed range (it may, for a 256 MiB
# buffer), the runner's copy of the output faults first: runtime_error.
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
    float* buf = nullptr;
    TORCH_CHECK(cudaMalloc(&buf, (size_t)n * sizeof(float)) == cudaSuccess, "cudaMalloc failed");
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    new_gelu_kernel<<<(unsigned int)blocks, threads>>>(xc.data_ptr<float>(), buf, n);
    cudaFree(buf);  // synchronises the device, then releases the memory
    return torch::from_blob(buf, xc.sizes(), xc.options());
}
"""

freed_ext = load_inline(
    name="freed_output_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return freed_ext.new_gelu(x)
