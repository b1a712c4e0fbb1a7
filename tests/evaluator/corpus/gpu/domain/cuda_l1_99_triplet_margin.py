# task: level1/99_TripletMarginLoss.py
# expect: ok
# mode: gpu
# memory_budget_mb: 16384 (three 32768 x 8192 fp32 inputs: 3 GiB)
# TripletMarginLoss(margin, p=2, eps=1e-6): per row,
# d(a, x) = ||a - x + eps||_2 as torch.pairwise_distance computes it, and
# loss = max(margin + d(a, pos) - d(a, neg), 0), averaged. One block per
# row computes both squared distances in one pass over the three rows
# (float4 loads when the row length allows), block-reduces them with warp
# shuffles, and writes the row's loss; a one-block kernel takes the mean.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

triplet_cpp = "torch::Tensor triplet_margin(torch::Tensor a, torch::Tensor p, torch::Tensor n, double margin, double eps);"

triplet_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cmath>

#define CHECK_INPUT(x) TORCH_CHECK(x.is_cuda() && x.is_contiguous(), #x " must be a contiguous CUDA tensor")

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ void accum(float a, float p, float n, float eps, float& sp, float& sn) {
    const float dp = (a - p) + eps;
    const float dn = (a - n) + eps;
    sp += dp * dp;
    sn += dn * dn;
}

template <bool VEC>
__global__ void triplet_row_kernel(const float* __restrict__ A, const float* __restrict__ P,
                                   const float* __restrict__ N, float* __restrict__ row_loss,
                                   int64_t D, float margin, float eps) {
    const int64_t row = blockIdx.x;
    const float* a = A + row * D;
    const float* p = P + row * D;
    const float* n = N + row * D;
    float sp = 0.0f, sn = 0.0f;
    if (VEC) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* p4 = reinterpret_cast<const float4*>(p);
        const float4* n4 = reinterpret_cast<const float4*>(n);
        for (int64_t i = threadIdx.x; i < D / 4; i += kThreads) {
            const float4 va = a4[i], vp = p4[i], vn = n4[i];
            accum(va.x, vp.x, vn.x, eps, sp, sn);
            accum(va.y, vp.y, vn.y, eps, sp, sn);
            accum(va.z, vp.z, vn.z, eps, sp, sn);
            accum(va.w, vp.w, vn.w, eps, sp, sn);
        }
    } else {
        for (int64_t i = threadIdx.x; i < D; i += kThreads) accum(a[i], p[i], n[i], eps, sp, sn);
    }
    __shared__ float sh_p[kThreads / 32], sh_n[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    sp = warp_sum(sp);
    sn = warp_sum(sn);
    if (lane == 0) { sh_p[warp] = sp; sh_n[warp] = sn; }
    __syncthreads();
    if (warp == 0) {
        sp = lane < kThreads / 32 ? sh_p[lane] : 0.0f;
        sn = lane < kThreads / 32 ? sh_n[lane] : 0.0f;
        sp = warp_sum(sp);
        sn = warp_sum(sn);
        if (lane == 0) {
            const float d_pos = sqrtf(sp);
            const float d_neg = sqrtf(sn);
            row_loss[row] = fmaxf(margin + d_pos - d_neg, 0.0f);
        }
    }
}

__global__ void mean_kernel(const float* __restrict__ v, int64_t n, float* __restrict__ out) {
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) acc += v[i];
    __shared__ double sh[kThreads];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = (float)(sh[0] / (double)n);
}

torch::Tensor triplet_margin(torch::Tensor a, torch::Tensor p, torch::Tensor n, double margin, double eps) {
    CHECK_INPUT(a); CHECK_INPUT(p); CHECK_INPUT(n);
    TORCH_CHECK(a.sizes() == p.sizes() && a.sizes() == n.sizes(), "anchor/positive/negative shapes differ");
    TORCH_CHECK(a.dim() == 2, "(batch, features) inputs expected");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32, "float32 inputs expected");
    const int64_t B = a.size(0), D = a.size(1);
    auto row_loss = torch::empty({B}, a.options());
    auto out = torch::empty({}, a.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    if (B > 0) {
        if (D % 4 == 0) {
            triplet_row_kernel<true><<<(unsigned)B, kThreads, 0, stream>>>(
                a.data_ptr<float>(), p.data_ptr<float>(), n.data_ptr<float>(), row_loss.data_ptr<float>(),
                D, (float)margin, (float)eps);
        } else {
            triplet_row_kernel<false><<<(unsigned)B, kThreads, 0, stream>>>(
                a.data_ptr<float>(), p.data_ptr<float>(), n.data_ptr<float>(), row_loss.data_ptr<float>(),
                D, (float)margin, (float)eps);
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    mean_kernel<<<1, kThreads, 0, stream>>>(row_loss.data_ptr<float>(), B, out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

triplet_ext = load_inline(
    name="triplet_margin_rows",
    cpp_sources=triplet_cpp,
    cuda_sources=triplet_cuda,
    functions=["triplet_margin"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super(ModelNew, self).__init__()
        self.margin = margin
        self.eps = 1e-6

    def forward(self, anchor, positive, negative):
        return triplet_ext.triplet_margin(anchor.contiguous(), positive.contiguous(),
                                          negative.contiguous(), float(self.margin), self.eps)
