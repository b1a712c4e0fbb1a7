# task: level1/98_KLDivLoss.py
# expect: ok
# mode: gpu
# memory_budget_mb: 8192 (two 16384 x 16384 fp32 inputs: 2 GiB)
# kl_div(log(p), q, reduction='batchmean') = sum(q * log q - q * log p) / batch.
# Both inputs are softmax outputs, strictly positive, so the kernel takes
# log p directly (no separate log pass over p) and needs no xlogy zero
# branch for q. Grid-stride partial sums accumulated in double, reduced with
# warp shuffles, one partial per block, then a one-block finalize kernel.
# CHECK_INPUT, <cfloat>/<cmath>/<cstdio>, printf on the error path.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kl_cpp = "torch::Tensor kl_div_batchmean(torch::Tensor predictions, torch::Tensor targets);"

kl_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 256;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__device__ double block_sum(double v) {
    __shared__ double warp_part[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = (threadIdx.x < kThreads / 32) ? warp_part[threadIdx.x] : 0.0;
    if (warp == 0) v = warp_sum(v);
    return v;  // valid in thread 0
}

__global__ void kl_partial_kernel(const float* __restrict__ p, const float* __restrict__ q,
                                  double* __restrict__ partial, int64_t n) {
    double acc = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads) {
        const float qi = q[i];
        const float lp = logf(p[i]);
        acc += (double)(qi * logf(qi) - qi * lp);
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void kl_finalize_kernel(const double* __restrict__ partial, int n_parts,
                                   float* __restrict__ out, double inv_batch) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < n_parts; i += kThreads) acc += partial[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = (float)(acc * inv_batch);
}

torch::Tensor kl_div_batchmean(torch::Tensor predictions, torch::Tensor targets) {
    CHECK_INPUT(predictions);
    CHECK_INPUT(targets);
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "predictions and targets differ in shape");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32 && targets.scalar_type() == torch::kFloat32,
                "float32 inputs expected");
    TORCH_CHECK(predictions.dim() >= 1 && predictions.size(0) > 0, "a non-empty batch expected");
    const int64_t n = predictions.numel();
    const int n_parts = 132 * 8;
    auto partial = torch::empty({n_parts}, predictions.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, predictions.options());
    kl_partial_kernel<<<n_parts, kThreads>>>(predictions.data_ptr<float>(), targets.data_ptr<float>(),
                                             partial.data_ptr<double>(), n);
    kl_finalize_kernel<<<1, kThreads>>>(partial.data_ptr<double>(), n_parts, out.data_ptr<float>(),
                                        1.0 / (double)predictions.size(0));
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("kl_div_batchmean: CUDA error %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "kl_div_batchmean failed: ", cudaGetErrorString(err));
    }
    return out;
}
"""

kl_ext = load_inline(
    name="kl_div_probs",
    cpp_sources=kl_cpp,
    cuda_sources=kl_cuda,
    functions=["kl_div_batchmean"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        return kl_ext.kl_div_batchmean(predictions.contiguous(), targets.contiguous())
