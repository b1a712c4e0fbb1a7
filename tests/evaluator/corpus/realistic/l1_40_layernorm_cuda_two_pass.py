# task: level1/40_LayerNorm
# style: CUDA load_inline; keeps nn.LayerNorm for its parameters; cub BlockReduce<double> partials; two kernels
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cub/block/block_reduce.cuh>

constexpr int kThreads = 256;
constexpr int kItems = 16;

struct SumSq {
    double s;
    double ss;
};

struct SumSqOp {
    __device__ __forceinline__ SumSq operator()(const SumSq& a, const SumSq& b) const {
        return SumSq{a.s + b.s, a.ss + b.ss};
    }
};

__global__ void ln_partial_kernel(const float* __restrict__ x, double* __restrict__ partials,
                                  int64_t row_len, int64_t chunks) {
    using BlockReduce = cub::BlockReduce<SumSq, kThreads>;
    __shared__ typename BlockReduce::TempStorage temp;
    const int64_t row = blockIdx.y;
    const int64_t chunk = blockIdx.x;
    const int64_t begin = chunk * (int64_t)kThreads * kItems;
    const float* xr = x + row * row_len;
    float s = 0.0f, ss = 0.0f;
    #pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int64_t j = begin + (int64_t)it * kThreads + threadIdx.x;
        if (j < row_len) {
            const float v = xr[j];
            s += v;
            ss += v * v;
        }
    }
    SumSq agg = BlockReduce(temp).Reduce(SumSq{(double)s, (double)ss}, SumSqOp());
    if (threadIdx.x == 0) {
        partials[(row * chunks + chunk) * 2 + 0] = agg.s;
        partials[(row * chunks + chunk) * 2 + 1] = agg.ss;
    }
}

__global__ void ln_apply_kernel(const float* __restrict__ x, const double* __restrict__ stats,
                                const float* __restrict__ w, const float* __restrict__ b,
                                float* __restrict__ y, int64_t row_len, int64_t total, double eps) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / row_len;
        const int64_t j = i - row * row_len;
        const double mean = stats[row * 2] / (double)row_len;
        const double var = stats[row * 2 + 1] / (double)row_len - mean * mean;
        const float rstd = (float)(1.0 / sqrt(var + eps));
        y[i] = (x[i] - (float)mean) * rstd * w[j] + b[j];
    }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    auto xc = x.contiguous();
    const int64_t row_len = weight.numel();
    const int64_t rows = xc.numel() / row_len;
    const int64_t per_block = (int64_t)kThreads * kItems;
    const int64_t chunks = (row_len + per_block - 1) / per_block;
    auto stream = at::cuda::getCurrentCUDAStream();
    auto partials = torch::empty({rows, chunks, 2}, xc.options().dtype(torch::kFloat64));
    dim3 grid((unsigned)chunks, (unsigned)rows);
    ln_partial_kernel<<<grid, kThreads, 0, stream>>>(xc.data_ptr<float>(), partials.data_ptr<double>(), row_len, chunks);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto stats = partials.sum(1).contiguous();
    auto y = torch::empty_like(xc);
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t total = xc.numel();
    ln_apply_kernel<<<132 * 8, 256, 0, stream>>>(xc.data_ptr<float>(), stats.data_ptr<double>(),
                                                   wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                   y.data_ptr<float>(), row_len, total, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

layernorm_cpp = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

layernorm_ext = load_inline(
    name="layernorm_two_pass",
    cpp_sources=layernorm_cpp,
    cuda_sources=layernorm_cuda,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layernorm_ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
