# task: level1/88_MinGPTNewGelu.py
# expect: incorrect
# mode: gpu
# hack: the kernel computes the right values but in place, over the input,
# and forward returns the input tensor itself (no output allocation, half
# the memory traffic). The judge finds its input changed and the output
# aliasing it: incorrect. (Rule-clean.)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

void new_gelu_inplace(torch::Tensor x);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void new_gelu_inplace_kernel(float* x, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

void new_gelu_inplace(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "new_gelu_inplace: contiguous CUDA tensor expected");
    const int64_t n = x.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    new_gelu_inplace_kernel<<<(unsigned int)blocks, threads>>>(x.data_ptr<float>(), n);
}
"""

inplace_ext = load_inline(
    name="alias_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu_inplace"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        inplace_ext.new_gelu_inplace(x)
        return x
