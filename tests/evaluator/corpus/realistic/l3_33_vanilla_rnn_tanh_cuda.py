# task: level3/33_VanillaRNN
# style: CUDA load_inline; module-level batch_size constant used by __init__ like the reference; stateful
#        self.hidden updated in forward; fused bias + tanh epilogue after a torch.addmm-free matmul
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

batch_size = 256

bias_tanh_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_tanh_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t total, int64_t cols) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        y[i] = tanhf(x[i] + b[i % cols]);
    }
}

torch::Tensor linear_tanh(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto pre = torch::matmul(x, w.t()).contiguous();
    auto y = torch::empty_like(pre);
    bias_tanh_kernel<<<132 * 16, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        pre.data_ptr<float>(), b.contiguous().data_ptr<float>(), y.data_ptr<float>(), pre.numel(), pre.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

rnn_ext = load_inline(
    name="rnn_linear_tanh",
    cpp_sources="torch::Tensor linear_tanh(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=bias_tanh_source,
    functions=["linear_tanh"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super(ModelNew, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, initial_hidden=None) -> torch.Tensor:
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = rnn_ext.linear_tanh(combined, self.i2h.weight, self.i2h.bias)
        return self.h2o(self.hidden)
