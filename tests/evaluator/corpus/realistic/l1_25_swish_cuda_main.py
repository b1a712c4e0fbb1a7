# task: level1/25_Swish
# style: CUDA load_inline; host-side std::cerr warning; <iostream>; __main__ self-test block
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

swish_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <iostream>

__global__ void swish_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        const float v = x[idx];
        out[idx] = v / (1.0f + expf(-v));
    }
}

torch::Tensor swish_cuda(torch::Tensor x) {
    if (!x.is_contiguous()) {
        std::cerr << "swish_cuda: non-contiguous input, making a contiguous copy" << std::endl;
    }
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    swish_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

swish_cpp_source = "torch::Tensor swish_cuda(torch::Tensor x);"

swish = load_inline(
    name="swish",
    cpp_sources=swish_cpp_source,
    cuda_sources=swish_source,
    functions=["swish_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.swish = swish

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.swish.swish_cuda(x)


if __name__ == "__main__":
    batch_size = 16
    dim = 16384
    model = ModelNew().cuda()
    x = torch.rand(batch_size, dim, device="cuda")
    ref = x * torch.sigmoid(x)
    out = model(x)
    print("allclose:", torch.allclose(out, ref, atol=1e-5, rtol=1e-5))
