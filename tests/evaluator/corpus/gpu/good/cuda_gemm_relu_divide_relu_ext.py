# task: level2/63_Gemm_ReLU_Divide.py
# expect: ok
# mode: gpu
# torch's Linear (the same cuBLAS GEMM as the reference) followed by a CUDA
# kernel fusing ReLU and the division. Its extension is named "relu_ext", and
# so is the one in cuda_conv_divide_leakyrelu_relu_ext.py: same name, same
# entry point and signature, different code. korch must build and load each
# one on its own (a cache keyed by the name would hand one task the other's
# kernel, and the verdict would be incorrect).
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

// out = relu(y) / divisor, as torch.relu(x) / self.divisor
__global__ void relu_divide_kernel(const float* __restrict__ y, float* __restrict__ out,
                                   float divisor, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = y[i];
        v = v > 0.0f ? v : 0.0f;
        out[i] = v / divisor;
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
    relu_divide_kernel<<<(unsigned int)blocks, threads>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), (float)divisor, n);
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
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        y = self.linear(x)
        return relu_ext.relu_forward(y, float(self.divisor))
