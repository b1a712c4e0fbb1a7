# task: level2/39_Gemm_Scale_BatchNorm.py
# expect: ok
# mode: gpu
# torch's Linear, then training-mode BatchNorm1d of (y * scale) in CUDA.
# Statistics kernel: a block owns 32 features (threadIdx.x) and 8 row
# lanes (threadIdx.y); warps read 128 contiguous bytes of a row; two passes
# (mean, then biased variance of the deviations) reduced across the row
# lanes in shared memory. Apply kernel: grid-stride elementwise
# (z - mean) * invstd * gamma + beta on z = y * scale. CHECK_INPUT macros,
# <cfloat>/<cmath>/<cstdio>, printf + TORCH_CHECK on launch errors.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bn_cpp = r"""
std::vector<torch::Tensor> scaled_bn_stats(torch::Tensor y, torch::Tensor scale, double eps);
torch::Tensor scaled_bn_apply(torch::Tensor y, torch::Tensor scale, torch::Tensor mean,
                              torch::Tensor invstd, torch::Tensor weight, torch::Tensor bias);
"""

bn_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

static void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("%s: %s\n", what, cudaGetErrorString(err));
        TORCH_CHECK(false, what, " failed: ", cudaGetErrorString(err));
    }
}

constexpr int TX = 32;  // features per block
constexpr int TY = 8;   // row lanes per block

__global__ void scaled_bn_stats_kernel(const float* __restrict__ y, const float* __restrict__ scale,
                                       float* __restrict__ mean_out, float* __restrict__ var_out,
                                       float* __restrict__ invstd_out, int64_t M, int64_t N, float eps) {
    __shared__ float red[TY][TX];
    __shared__ float col_mean[TX];
    const int64_t col = (int64_t)blockIdx.x * TX + threadIdx.x;
    const bool valid = col < N;
    const float sc = valid ? scale[col] : 0.0f;
    float s = 0.0f;
    if (valid)
        for (int64_t r = threadIdx.y; r < M; r += TY) s += y[r * N + col] * sc;
    red[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0) {
        float t = 0.0f;
        for (int i = 0; i < TY; ++i) t += red[i][threadIdx.x];
        col_mean[threadIdx.x] = t / (float)M;
    }
    __syncthreads();
    const float mu = col_mean[threadIdx.x];
    float q = 0.0f;
    if (valid)
        for (int64_t r = threadIdx.y; r < M; r += TY) {
            const float d = y[r * N + col] * sc - mu;
            q += d * d;
        }
    red[threadIdx.y][threadIdx.x] = q;
    __syncthreads();
    if (threadIdx.y == 0 && valid) {
        float t = 0.0f;
        for (int i = 0; i < TY; ++i) t += red[i][threadIdx.x];
        const float var = t / (float)M;
        mean_out[col] = mu;
        var_out[col] = var;
        invstd_out[col] = 1.0f / sqrtf(var + eps);
    }
}

__global__ void scaled_bn_apply_kernel(const float* __restrict__ y, const float* __restrict__ scale,
                                       const float* __restrict__ mean, const float* __restrict__ invstd,
                                       const float* __restrict__ w, const float* __restrict__ b,
                                       float* __restrict__ out, int64_t total, int64_t N) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % N;
        const float z = y[i] * scale[c];
        out[i] = (z - mean[c]) * invstd[c] * w[c] + b[c];
    }
}

std::vector<torch::Tensor> scaled_bn_stats(torch::Tensor y, torch::Tensor scale, double eps) {
    CHECK_INPUT(y);
    CHECK_INPUT(scale);
    TORCH_CHECK(y.dim() == 2 && scale.numel() == y.size(1), "y (M, N) and scale (N,) expected");
    const int64_t M = y.size(0), N = y.size(1);
    auto mean = torch::empty({N}, y.options());
    auto var = torch::empty({N}, y.options());
    auto invstd = torch::empty({N}, y.options());
    if (N > 0) {
        const dim3 block(TX, TY);
        const dim3 grid((unsigned)((N + TX - 1) / TX));
        scaled_bn_stats_kernel<<<grid, block>>>(y.data_ptr<float>(), scale.data_ptr<float>(),
                                                mean.data_ptr<float>(), var.data_ptr<float>(),
                                                invstd.data_ptr<float>(), M, N, (float)eps);
        check_launch("scaled_bn_stats_kernel");
    }
    return {mean, var, invstd};
}

torch::Tensor scaled_bn_apply(torch::Tensor y, torch::Tensor scale, torch::Tensor mean,
                              torch::Tensor invstd, torch::Tensor weight, torch::Tensor bias) {
    CHECK_INPUT(y); CHECK_INPUT(scale); CHECK_INPUT(mean); CHECK_INPUT(invstd);
    CHECK_INPUT(weight); CHECK_INPUT(bias);
    auto out = torch::empty_like(y);
    const int64_t total = y.numel();
    if (total == 0) return out;
    const int threads = 256;
    int64_t blocks = (total + threads - 1) / threads;
    if (blocks > 132 * 32) blocks = 132 * 32;
    scaled_bn_apply_kernel<<<(unsigned)blocks, threads>>>(
        y.data_ptr<float>(), scale.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(),
        weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, y.size(1));
    check_launch("scaled_bn_apply_kernel");
    return out;
}
"""

scaled_bn = load_inline(
    name="gemm_scale_bn_cuda",
    cpp_sources=bn_cpp,
    cuda_sources=bn_cuda,
    functions=["scaled_bn_stats", "scaled_bn_apply"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        y = self.gemm(x).contiguous()
        scale = self.scale.contiguous()
        mean, var, invstd = scaled_bn.scaled_bn_stats(y, scale, self.bn.eps)
        if self.training and self.bn.track_running_stats:
            with torch.no_grad():
                n = y.shape[0]
                self.bn.num_batches_tracked += 1
                self.bn.running_mean.mul_(1.0 - self.bn.momentum).add_(mean, alpha=self.bn.momentum)
                self.bn.running_var.mul_(1.0 - self.bn.momentum).add_(
                    var * (n / max(n - 1, 1)), alpha=self.bn.momentum)
        return scaled_bn.scaled_bn_apply(y, scale, mean, invstd, self.bn.weight, self.bn.bias)
