# task: level1/41_Max_Pooling_1D
# style: CUDA load_inline; nn.MaxPool1d arguments kept as attributes; CUDART_INF_F padding from <math_constants.h>
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

maxpool1d_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <math_constants.h>

__global__ void maxpool1d_kernel(const float* __restrict__ x, float* __restrict__ y,
                                 int64_t rows, int64_t in_len, int64_t out_len,
                                 int kernel_size, int stride, int padding, int dilation) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * out_len) return;
    const int64_t r = idx / out_len;
    const int64_t o = idx % out_len;
    const float* xr = x + r * in_len;
    const int64_t start = o * stride - padding;
    float best = -CUDART_INF_F;
    for (int k = 0; k < kernel_size; ++k) {
        const int64_t pos = start + (int64_t)k * dilation;
        if (pos >= 0 && pos < in_len) best = fmaxf(best, xr[pos]);
    }
    y[idx] = best;
}

torch::Tensor maxpool1d_forward(torch::Tensor x, int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation) {
    TORCH_CHECK(x.dim() == 3, "expected (batch, channels, length)");
    auto xc = x.contiguous();
    const int64_t in_len = xc.size(2);
    const int64_t out_len = (in_len + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    auto y = torch::empty({xc.size(0), xc.size(1), out_len}, xc.options());
    const int64_t rows = xc.size(0) * xc.size(1);
    const int64_t total = rows * out_len;
    const int threads = 256;
    maxpool1d_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), rows, in_len, out_len,
        (int)kernel_size, (int)stride, (int)padding, (int)dilation);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

maxpool1d = load_inline(
    name="maxpool1d_ext",
    cpp_sources="torch::Tensor maxpool1d_forward(torch::Tensor x, int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation);",
    cuda_sources=maxpool1d_source,
    functions=["maxpool1d_forward"],
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False):
        super(ModelNew, self).__init__()
        assert not return_indices, "indices are not produced by this kernel"
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return maxpool1d.maxpool1d_forward(x, self.kernel_size, self.stride, self.padding, self.dilation)
