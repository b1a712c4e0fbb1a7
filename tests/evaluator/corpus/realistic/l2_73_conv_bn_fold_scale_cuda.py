# task: level2/73_Conv2d_BatchNorm_Scaling
# style: CUDA load_inline; scaling folded into the BN affine (self.bn.weight.data = ...); train-mode batch statistics
#        computed by a custom kernel, running statistics updated like nn.BatchNorm2d
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bn_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int kThreads = 512;

__global__ void channel_stats_kernel(const float* __restrict__ x, double* __restrict__ stats,
                                     int64_t N, int64_t C, int64_t HW) {
    const int64_t c = blockIdx.x;
    float s = 0.0f, ss = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
        const float* p = x + (n * C + c) * HW;
        for (int64_t i = threadIdx.x; i < HW; i += kThreads) {
            const float v = p[i];
            s += v;
            ss += v * v;
        }
    }
    __shared__ double sh_s[kThreads];
    __shared__ double sh_ss[kThreads];
    sh_s[threadIdx.x] = s;
    sh_ss[threadIdx.x] = ss;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            sh_s[threadIdx.x] += sh_s[threadIdx.x + stride];
            sh_ss[threadIdx.x] += sh_ss[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double count = (double)(N * HW);
        const double mean = sh_s[0] / count;
        stats[c * 2] = mean;
        stats[c * 2 + 1] = sh_ss[0] / count - mean * mean;  // biased variance
    }
}

__global__ void bn_apply_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                const float* __restrict__ invstd, const float* __restrict__ w,
                                const float* __restrict__ b, float* __restrict__ y,
                                int64_t total, int64_t C, int64_t HW) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = (i / HW) % C;
        y[i] = (x[i] - mean[c]) * invstd[c] * w[c] + b[c];
    }
}

torch::Tensor channel_stats(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t N = xc.size(0), C = xc.size(1), HW = xc.size(2) * xc.size(3);
    auto stats = torch::empty({C, 2}, xc.options().dtype(torch::kFloat64));
    channel_stats_kernel<<<(unsigned)C, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), stats.data_ptr<double>(), N, C, HW);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return stats;
}

torch::Tensor bn_apply(torch::Tensor x, torch::Tensor mean, torch::Tensor invstd, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t C = xc.size(1), HW = xc.size(2) * xc.size(3);
    bn_apply_kernel<<<132 * 16, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), mean.contiguous().data_ptr<float>(), invstd.contiguous().data_ptr<float>(),
        w.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
        xc.numel(), C, HW);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

bn_cpp = """
torch::Tensor channel_stats(torch::Tensor x);
torch::Tensor bn_apply(torch::Tensor x, torch::Tensor mean, torch::Tensor invstd, torch::Tensor w, torch::Tensor b);
"""

bn_ext = load_inline(
    name="bn_fold_scale",
    cpp_sources=bn_cpp,
    cuda_sources=bn_source,
    functions=["channel_stats", "bn_apply"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor
        # s * (gamma * xhat + beta) == (s * gamma) * xhat + (s * beta)
        self.bn.weight.data = self.bn.weight.data * scaling_factor
        self.bn.bias.data = self.bn.bias.data * scaling_factor

    def forward(self, x):
        x = self.conv(x)
        bn = self.bn
        if self.training:
            stats = bn_ext.channel_stats(x)
            mean = stats[:, 0]
            var = stats[:, 1]
            with torch.no_grad():
                count = x.numel() // x.shape[1]
                bn.num_batches_tracked += 1
                bn.running_mean.mul_(1 - bn.momentum).add_(mean.float(), alpha=bn.momentum)
                bn.running_var.mul_(1 - bn.momentum).add_((var * count / (count - 1)).float(), alpha=bn.momentum)
            invstd = torch.rsqrt(var + bn.eps).float()
            mean = mean.float()
        else:
            mean = bn.running_mean
            invstd = torch.rsqrt(bn.running_var + bn.eps)
        return bn_ext.bn_apply(x, mean, invstd, bn.weight, bn.bias)
