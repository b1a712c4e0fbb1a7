# task: level2/63_Gemm_ReLU_Divide
# style: CUDA load_inline; forward(self, input) parameter; F.linear for the GEMM, fused ReLU/divide kernel
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

relu_div_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_div_kernel(const float* input, float* output, float divisor, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) output[i] = fmaxf(input[i], 0.0f) / divisor;
}

torch::Tensor relu_div(torch::Tensor input, double divisor) {
    auto output = torch::empty_like(input);
    const int64_t n = input.numel();
    const int threads = 256;
    relu_div_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), (float)divisor, n);
    return output;
}
"""

relu_div = load_inline(
    name="relu_div",
    cpp_sources="torch::Tensor relu_div(torch::Tensor input, double divisor);",
    cuda_sources=relu_div_source,
    functions=["relu_div"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, input):
        hidden = F.linear(input, self.linear.weight, self.linear.bias)
        return relu_div.relu_div(hidden.contiguous(), self.divisor)
