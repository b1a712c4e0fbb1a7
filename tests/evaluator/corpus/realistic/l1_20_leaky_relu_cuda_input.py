# task: level1/20_LeakyReLU
# style: CUDA load_inline; forward(self, input) shadows the builtin; negative slope passed as a scalar
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

leaky_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void leaky_relu_kernel(const float* input, float* output, float slope, long long size) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = input[idx];
        output[idx] = v >= 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor input, double negative_slope) {
    auto in = input.contiguous();
    auto output = torch::empty_like(in);
    long long size = in.numel();
    const int block_size = 512;
    const long long num_blocks = (size + block_size - 1) / block_size;
    if (size > 0) {
        leaky_relu_kernel<<<(unsigned int)num_blocks, block_size>>>(
            in.data_ptr<float>(), output.data_ptr<float>(), (float)negative_slope, size);
    }
    return output;
}
"""

leaky_relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor input, double negative_slope);"

leaky_relu = load_inline(
    name="leaky_relu",
    cpp_sources=leaky_relu_cpp_source,
    cuda_sources=leaky_relu_source,
    functions=["leaky_relu_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope
        self.leaky_relu = leaky_relu

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.leaky_relu.leaky_relu_cuda(input, self.negative_slope)
