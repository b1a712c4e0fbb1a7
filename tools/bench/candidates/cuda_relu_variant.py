# task: any ReLU task (KernelBench level1/19_ReLU.py in scripts/gpu/suite.sh throughput)
# expect: ok (korch-bench-eval --throughput replaces KORCH_VARIANT, so every
# evaluation is a new load_inline source: a compile-cache miss, a new nvcc run)
# A CUDA ReLU through load_inline; the variant comment makes each copy distinct.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
// korch-bench-eval variant KORCH_VARIANT
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "CUDA tensor expected");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    relu_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
cpp_src = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_cuda_ext = load_inline(
    name="relu_cuda_ext",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["relu_cuda"],
    extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr", "-arch=sm_90", "-lineinfo"],
    with_cuda=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_cuda_ext.relu_cuda(x.contiguous())
