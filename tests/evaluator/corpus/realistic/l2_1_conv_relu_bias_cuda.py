# task: level2/1_Conv2D_ReLU_BiasAdd
# style: CUDA load_inline; cuDNN conv kept, ReLU + per-channel bias fused; parameters created in the reference's order
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_relu_bias_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_bias_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ out, int64_t total, int channels, int64_t hw) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int c = (int)((i / hw) % channels);
        out[i] = fmaxf(x[i], 0.0f) + bias[c];
    }
}

torch::Tensor relu_bias_forward(torch::Tensor x, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int channels = xc.size(1);
    const int64_t hw = xc.size(2) * xc.size(3);
    const int64_t total = xc.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((total + threads - 1) / threads, 132 * 32);
    relu_bias_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), bias.contiguous().data_ptr<float>(), out.data_ptr<float>(), total, channels, hw);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

fused_relu_bias = load_inline(
    name="fused_relu_bias",
    cpp_sources="torch::Tensor relu_bias_forward(torch::Tensor x, torch::Tensor bias);",
    cuda_sources=fused_relu_bias_source,
    functions=["relu_bias_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.fused_relu_bias = fused_relu_bias

    def forward(self, x):
        x = self.conv(x)
        return self.fused_relu_bias.relu_bias_forward(x, self.bias)
