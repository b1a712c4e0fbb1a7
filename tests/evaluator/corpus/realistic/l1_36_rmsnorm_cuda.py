# task: level1/36_RMSNorm_
# style: CUDA load_inline; one thread per (batch, spatial) position, channel loop; eps from __init__
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rms_norm_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ out,
                                int64_t batch, int64_t channels, int64_t spatial, float eps) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * spatial) return;
    const int64_t b = idx / spatial;
    const int64_t s = idx % spatial;
    const float* base = x + b * channels * spatial + s;
    float* obase = out + b * channels * spatial + s;
    float sum_sq = 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
        const float v = base[c * spatial];
        sum_sq += v * v;
    }
    const float rms = sqrtf(sum_sq / (float)channels + eps);
    for (int64_t c = 0; c < channels; ++c) {
        obase[c * spatial] = base[c * spatial] / rms;
    }
}

torch::Tensor rms_norm_forward(torch::Tensor x, double eps) {
    TORCH_CHECK(x.dim() >= 2, "expected (batch, features, ...)");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t batch = xc.size(0);
    const int64_t channels = xc.size(1);
    const int64_t spatial = xc.numel() / (batch * channels);
    const int64_t total = batch * spatial;
    const int threads = 256;
    rms_norm_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), batch, channels, spatial, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

rms_norm_cpp_source = "torch::Tensor rms_norm_forward(torch::Tensor x, double eps);"

rms_norm = load_inline(
    name="rms_norm",
    cpp_sources=rms_norm_cpp_source,
    cuda_sources=rms_norm_cuda_source,
    functions=["rms_norm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps
        self.rms_norm = rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms_norm.rms_norm_forward(x, self.eps)
