# task: level2/84_Gemm_BatchNorm_Scaling_Softmax.py
# expect: ok
# mode: gpu
# torch's Linear, then two CUDA kernels: per-feature batch statistics
# (training-mode BatchNorm1d: mean, biased variance, two passes), and one
# block per row that applies BN + affine + the learnable scale and the row
# softmax. The 8192 normalised values of a row are kept in shared memory
# (32 KiB), so the row is read once; max and sum use warp shuffles.
# <cfloat> for -FLT_MAX, CHECK_INPUT, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor bn_batch_stats(torch::Tensor y, double eps);
torch::Tensor bn_scale_softmax(torch::Tensor y, torch::Tensor stats, torch::Tensor weight,
                               torch::Tensor bias, torch::Tensor scale);
"""

cuda_src = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>

#define CHECK_INPUT(x) TORCH_CHECK(x.is_cuda(), #x " must be CUDA"); TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")

constexpr int kMaxCols = 8192;
constexpr int kThreads = 512;

// stats[0, c] = mean, stats[1, c] = 1 / sqrt(var + eps)
__global__ void col_stats_kernel(const float* __restrict__ y, float* __restrict__ stats,
                                 int64_t M, int64_t N, float eps) {
    __shared__ float red[8][32];
    const int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    const bool ok = c < N;
    float s = 0.0f;
    if (ok) for (int64_t r = threadIdx.y; r < M; r += 8) s += y[r * N + c];
    red[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    float mean = 0.0f;
    for (int i = 0; i < 8; ++i) mean += red[i][threadIdx.x];
    mean /= (float)M;
    __syncthreads();
    float q = 0.0f;
    if (ok) for (int64_t r = threadIdx.y; r < M; r += 8) { const float d = y[r * N + c] - mean; q += d * d; }
    red[threadIdx.y][threadIdx.x] = q;
    __syncthreads();
    if (threadIdx.y == 0 && ok) {
        float v = 0.0f;
        for (int i = 0; i < 8; ++i) v += red[i][threadIdx.x];
        v /= (float)M;
        stats[c] = mean;
        stats[N + c] = 1.0f / sqrtf(v + eps);
    }
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void bn_scale_softmax_kernel(const float* __restrict__ y, const float* __restrict__ stats,
                                        const float* __restrict__ w, const float* __restrict__ b,
                                        const float* __restrict__ scale, float* __restrict__ out,
                                        int64_t N) {
    __shared__ float row[kMaxCols];
    __shared__ float red[kThreads / 32];
    const int64_t r = blockIdx.x;
    const float* yr = y + r * N;
    const float s = scale[0];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float m = -FLT_MAX;
    for (int64_t c = threadIdx.x; c < N; c += kThreads) {
        const float v = s * ((yr[c] - stats[c]) * stats[N + c] * w[c] + b[c]);
        row[c] = v;
        m = fmaxf(m, v);
    }
    m = warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = lane < kThreads / 32 ? red[lane] : -FLT_MAX;
    m = warp_max(m);  // every warp reduces the partials itself: no second broadcast step
    __syncthreads();
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < N; c += kThreads) {
        const float e = expf(row[c] - m);
        row[c] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    sum = lane < kThreads / 32 ? red[lane] : 0.0f;
    sum = warp_sum(sum);
    float* o = out + r * N;
    for (int64_t c = threadIdx.x; c < N; c += kThreads) o[c] = row[c] / sum;
}

torch::Tensor bn_batch_stats(torch::Tensor y, double eps) {
    CHECK_INPUT(y);
    TORCH_CHECK(y.dim() == 2 && y.scalar_type() == torch::kFloat32, "(M, N) float32 expected");
    const int64_t M = y.size(0), N = y.size(1);
    auto stats = torch::empty({2, N}, y.options());
    if (N == 0) return stats;
    col_stats_kernel<<<(unsigned)((N + 31) / 32), dim3(32, 8)>>>(y.data_ptr<float>(), stats.data_ptr<float>(),
                                                                 M, N, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return stats;
}

torch::Tensor bn_scale_softmax(torch::Tensor y, torch::Tensor stats, torch::Tensor weight,
                               torch::Tensor bias, torch::Tensor scale) {
    CHECK_INPUT(y); CHECK_INPUT(stats); CHECK_INPUT(weight); CHECK_INPUT(bias); CHECK_INPUT(scale);
    TORCH_CHECK(y.size(1) <= kMaxCols, "at most ", kMaxCols, " features per row");
    TORCH_CHECK(scale.numel() == 1, "a scalar scale is expected");
    auto out = torch::empty_like(y);
    if (y.numel() == 0) return out;
    bn_scale_softmax_kernel<<<(unsigned)y.size(0), kThreads>>>(
        y.data_ptr<float>(), stats.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
        scale.data_ptr<float>(), out.data_ptr<float>(), y.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

bn_softmax = load_inline(
    name="gemm_bn_scale_softmax",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["bn_batch_stats", "bn_scale_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        y = self.gemm(x).contiguous()
        stats = bn_softmax.bn_batch_stats(y, self.bn.eps)
        return bn_softmax.bn_scale_softmax(y, stats, self.bn.weight, self.bn.bias,
                                           self.scale.contiguous())
