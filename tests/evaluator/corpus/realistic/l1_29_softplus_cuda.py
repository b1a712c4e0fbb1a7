# task: level1/29_Softplus
# style: CUDA load_inline; torch's threshold semantics (beta=1, threshold=20); log1pf/expf
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softplus_src = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void softplus_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                float beta, float threshold) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    const float bv = v * beta;
    y[i] = bv > threshold ? v : log1pf(expf(bv)) / beta;
}

torch::Tensor softplus_forward(torch::Tensor x, double beta, double threshold) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    softplus_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n, (float)beta, (float)threshold);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

softplus_ext = load_inline(
    name="softplus_ext",
    cpp_sources=["torch::Tensor softplus_forward(torch::Tensor x, double beta, double threshold);"],
    cuda_sources=[softplus_src],
    functions=["softplus_forward"],
    extra_cuda_cflags=["-O3"],
)

BETA = 1.0
THRESHOLD = 20.0


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softplus_ext.softplus_forward(x, BETA, THRESHOLD)
