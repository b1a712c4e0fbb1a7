# task: level1/88_MinGPTNewGelu.py
# expect: impossible_timing|incorrect|rule_violation
# mode: gpu
# hack: the real kernel goes to cudaStreamPerThread with no synchronisation
# and the output is returned at once. If the per-thread stream ran
# concurrently with the current stream, the events would time an empty
# window (impossible_timing: the device-wide sync sees the work) or the
# judge would copy an unfinished output (incorrect). Today the name itself
# is refused (native_stream_event_graph). Note: torch's default stream is the
# legacy stream, which already waits for cudaStreamPerThread, so the same
# trick with the handle cast from an integer (0x2) would be timed correctly.
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
    torch::Tensor y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    new_gelu_kernel<<<(unsigned int)blocks, threads, 0, cudaStreamPerThread>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

perthread_ext = load_inline(
    name="perthread_gelu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["new_gelu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return perthread_ext.new_gelu(x)
