# task: level1/23_Softmax.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# Row softmax, one 1024-thread block per row, two sweeps over the row.
# Sweep 1 is an online softmax: each thread keeps a running (max, sum)
# over float4 loads (sum rescaled when the max grows); the pairs are merged
# across lanes with __shfl_xor_sync and across warps in shared memory.
# Sweep 2 writes exp(x - max) / sum with float4 stores. The scalar path
# handles rows whose length or alignment rules out float4. Extra memory is
# O(1) per row. <cfloat> (-FLT_MAX start), CHECK_INPUT, printf on errors.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_cpp = "torch::Tensor softmax_rows(torch::Tensor x);"

softmax_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 1024;

struct MaxSum {
    float m;
    float s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void push(MaxSum& st, float v) {
    if (v > st.m) {
        st.s = st.s * expf(st.m - v) + 1.0f;
        st.m = v;
    } else {
        st.s += expf(v - st.m);
    }
}

__device__ MaxSum block_merge(MaxSum st) {
    __shared__ float sm[kThreads / 32];
    __shared__ float ss[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)};
        st = merge(st, other);
    }
    if (lane == 0) { sm[warp] = st.m; ss[warp] = st.s; }
    __syncthreads();
    MaxSum t{-FLT_MAX, 0.0f};
    if (lane < kThreads / 32) t = MaxSum{sm[lane], ss[lane]};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, t.m, o), __shfl_xor_sync(0xffffffffu, t.s, o)};
        t = merge(t, other);
    }
    return t;  // every thread holds the row's (max, sum)
}

template <bool VEC>
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* xr = x + (int64_t)blockIdx.x * cols;
    float* yr = y + (int64_t)blockIdx.x * cols;
    MaxSum st{-FLT_MAX, 0.0f};
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int64_t i = threadIdx.x; i < cols / 4; i += kThreads) {
            const float4 v = x4[i];
            push(st, v.x); push(st, v.y); push(st, v.z); push(st, v.w);
        }
    } else {
        for (int64_t i = threadIdx.x; i < cols; i += kThreads) push(st, xr[i]);
    }
    const MaxSum row = block_merge(st);
    const float inv = 1.0f / row.s;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int64_t i = threadIdx.x; i < cols / 4; i += kThreads) {
            const float4 v = x4[i];
            y4[i] = make_float4(expf(v.x - row.m) * inv, expf(v.y - row.m) * inv,
                                expf(v.z - row.m) * inv, expf(v.w - row.m) * inv);
        }
    } else {
        for (int64_t i = threadIdx.x; i < cols; i += kThreads) yr[i] = expf(xr[i] - row.m) * inv;
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "(rows, cols) float32 expected");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    const bool vec = (cols % 4 == 0) &&
                     (reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0);
    if (vec) {
        softmax_rows_kernel<true><<<(unsigned)rows, kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    } else {
        softmax_rows_kernel<false><<<(unsigned)rows, kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("softmax_rows_kernel launch failed: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "softmax_rows_kernel launch failed: ", cudaGetErrorString(err));
    }
    return y;
}
"""

softmax_ext = load_inline(
    name="softmax_online_warp",
    cpp_sources=softmax_cpp,
    cuda_sources=softmax_cuda,
    functions=["softmax_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_rows(x.contiguous())
