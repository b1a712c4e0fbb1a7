# task: level2/71_Conv2d_Divide_LeakyReLU.py
# expect: ok
# mode: gpu
# torch's Conv2d (the same cuDNN call as the reference) followed by a CUDA
# kernel fusing the division and LeakyReLU(0.01). Its extension is named
# "relu_ext" with the entry point relu_forward(Tensor, float), exactly like
# cuda_gemm_relu_divide_relu_ext.py, but the code differs: were korch to key
# its build cache or module registry by the name, this task would run the
# other file's relu(y)/d and come back incorrect.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor y, double divisor);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// out = leaky_relu(y / divisor, 0.01)
__global__ void divide_leaky_kernel(const float* __restrict__ y, float* __restrict__ out,
                                    float divisor, float slope, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = y[i] / divisor;
        out[i] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor relu_forward(torch::Tensor y, double divisor) {
    TORCH_CHECK(y.is_cuda(), "relu_forward: CUDA tensor expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32, "relu_forward: float32 expected");
    torch::Tensor yc = y.contiguous();
    torch::Tensor out = torch::empty_like(yc);
    const int64_t n = yc.numel();
    if (n == 0) return out;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535 * 16) blocks = 65535 * 16;
    divide_leaky_kernel<<<(unsigned int)blocks, threads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), (float)divisor, 0.01f, n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "relu_forward: kernel launch failed");
    return out;
}
"""

relu_ext = load_inline(
    name="relu_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        y = self.conv(x)
        return relu_ext.relu_forward(y, float(self.divisor))
