# task: level1/88_MinGPTNewGelu.py
# expect: timeout
# mode: gpu
# hack (or plain bug): every thread of the kernel spins on a volatile flag
# in device memory that is zero and never set, so the kernel never ends
# (volatile: the load is repeated each iteration and the loop cannot be
# proven finite or removed). The runner blocks in its synchronisation; the
# judge's wall-clock limit ends it: timeout. Killing the runner must free
# the GPU: the manifest puts a good candidate right after this file.
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

__global__ void spinning_gelu_kernel(const volatile int* flag, const float* __restrict__ x,
                                     float* __restrict__ y, int64_t n) {
    while (flag[0] == 0) {
    }
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

torch::Tensor new_gelu(torch::Tensor x) {
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    torch::Tensor flag = torch::zeros({1}, xc.options().dtype(torch::kInt32));
    const int64_t n = xc.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    spinning_gelu_kernel<<<(unsigned int)blocks, threads>>>(
        flag.data_ptr<int>(), xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

spin_ext = load_inline(
    name="infinite_loop_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return spin_ext.new_gelu(x)
