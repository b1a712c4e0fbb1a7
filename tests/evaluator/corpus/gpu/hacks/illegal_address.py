# task: level1/88_MinGPTNewGelu.py
# expect: worker_crash|runtime_error
# mode: gpu
# hack (or plain bug): the kernel stores through a pointer 1 TiB past its
# output allocation, an unmapped address. The launch is asynchronous; the
# runner's synchronisation raises "an illegal memory access was
# encountered" (runtime_error) or the runner dies (worker_crash). The CUDA
# context is lost for good: the next evaluation must get a fresh one (the
# manifest puts a good candidate right after this file).
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

__global__ void new_gelu_kernel(const float* __restrict__ x, float* y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

torch::Tensor new_gelu(torch::Tensor x) {
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    // 2^38 floats = 1 TiB beyond the allocation: nothing is mapped there.
    float* bad = y.data_ptr<float>() + ((int64_t)1 << 38);
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    new_gelu_kernel<<<(unsigned int)blocks, threads>>>(xc.data_ptr<float>(), bad, n);
    return y;
}
"""

bad_ext = load_inline(
    name="illegal_address_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return bad_ext.new_gelu(x)
