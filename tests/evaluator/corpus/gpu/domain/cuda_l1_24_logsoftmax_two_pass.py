# task: level1/24_LogSoftmax.py
# expect: ok
# mode: gpu
# memory_budget_mb: 32768 (4096 x 393216 floats: 6 GiB in, 6 GiB out)
# Row log-softmax, one 512-thread block per row and three sweeps: the row
# max (warp-shuffle max, then across warps), sum(exp(x - max)) the same
# way, then x - max - log(sum). Templated on the element type through
# AT_DISPATCH_FLOATING_TYPES; the current stream and
# C10_CUDA_KERNEL_LAUNCH_CHECK; CHECK_INPUT macros.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

lsm_cpp = "torch::Tensor log_softmax_rows(torch::Tensor x);"

lsm_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cfloat>
#include <cmath>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) { const T u = __shfl_xor_sync(0xffffffffu, v, o); v = u > v ? u : v; }
    return v;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename scalar_t>
__global__ void log_softmax_rows_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t cols) {
    __shared__ scalar_t part[kWarps];
    const scalar_t* xr = x + (int64_t)blockIdx.x * cols;
    scalar_t* yr = y + (int64_t)blockIdx.x * cols;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    scalar_t m = -scalar_t(INFINITY);
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) m = xr[i] > m ? xr[i] : m;
    m = warp_max(m);
    if (lane == 0) part[warp] = m;
    __syncthreads();
    m = lane < kWarps ? part[lane] : -scalar_t(INFINITY);
    m = warp_max(m);
    __syncthreads();

    scalar_t s = 0;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) s += exp(xr[i] - m);
    s = warp_sum(s);
    if (lane == 0) part[warp] = s;
    __syncthreads();
    s = lane < kWarps ? part[lane] : scalar_t(0);
    s = warp_sum(s);
    const scalar_t log_s = log(s);

    for (int64_t i = threadIdx.x; i < cols; i += kThreads) yr[i] = (xr[i] - m) - log_s;
}

torch::Tensor log_softmax_rows(torch::Tensor x) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.dim() == 2, "(rows, cols) expected");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "log_softmax_rows", ([&] {
        log_softmax_rows_kernel<scalar_t><<<(unsigned)rows, kThreads, 0, stream>>>(
            x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), cols);
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

lsm_ext = load_inline(
    name="log_softmax_two_pass",
    cpp_sources=lsm_cpp,
    cuda_sources=lsm_cuda,
    functions=["log_softmax_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        y = lsm_ext.log_softmax_rows(xt.view(-1, xt.shape[-1]))
        return y.view(xt.shape).movedim(-1, dim)
