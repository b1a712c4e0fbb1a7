# task: level1/19_ReLU
# style: CUDA load_inline; <cuda.h>; module-level _cpp_src/_cuda_src; ModelNew alias; __main__ block
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (; i < n; i += stride) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int blocks = (int)std::min<int64_t>(wanted, 132 * 32);
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_cpp_src = "torch::Tensor relu_forward(torch::Tensor x);"

_relu_ext = load_inline(
    name="relu_ext_v1",
    cpp_sources=_cpp_src,
    cuda_sources=_cuda_src,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class OptimizedReLU(nn.Module):
    """ReLU with a grid-stride CUDA kernel."""

    def __init__(self):
        super().__init__()
        self._ext = _relu_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._ext.relu_forward(x)


ModelNew = OptimizedReLU


if __name__ == "__main__":
    m = ModelNew().cuda()
    x = torch.randn(64, 1024, device="cuda")
    print("max abs diff:", (m(x) - torch.relu(x)).abs().max().item())
