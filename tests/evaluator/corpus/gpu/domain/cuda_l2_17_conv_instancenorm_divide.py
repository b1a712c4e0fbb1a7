# task: level2/17_Conv2d_InstanceNorm_Divide.py
# expect: ok
# mode: gpu
# torch's Conv2d, then InstanceNorm2d (no affine, no running statistics:
# every (sample, channel) plane uses its own mean and biased variance) and
# the division by a constant, in one CUDA kernel: a block per 126 x 126
# plane, three passes (sum, squared deviations, write), block reductions
# through warp shuffles. <cfloat>/<cmath>, CHECK_INPUT, printf on errors.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

inorm_cpp = "torch::Tensor instance_norm_divide(torch::Tensor x, double eps, double divide_by);"

inorm_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kThreads = 512;

__device__ float block_allsum(float v) {
    __shared__ float part[kThreads / 32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < kThreads / 32 ? part[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
        if (lane == 0) total = t;
    }
    __syncthreads();
    const float r = total;
    __syncthreads();  // part/total may be reused by the next call
    return r;
}

__global__ void instance_norm_divide_kernel(const float* __restrict__ x, float* __restrict__ y,
                                            int64_t HW, float eps, float divide_by) {
    const float* p = x + (int64_t)blockIdx.x * HW;
    float* q = y + (int64_t)blockIdx.x * HW;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < HW; i += kThreads) s += p[i];
    const float mean = block_allsum(s) / (float)HW;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < HW; i += kThreads) {
        const float d = p[i] - mean;
        ss += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_allsum(ss) / (float)HW + eps);
    for (int64_t i = threadIdx.x; i < HW; i += kThreads) q[i] = ((p[i] - mean) * rstd) / divide_by;
}

torch::Tensor instance_norm_divide(torch::Tensor x, double eps, double divide_by) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.dim() == 4 && x.scalar_type() == torch::kFloat32, "NCHW float32 expected");
    auto y = torch::empty_like(x);
    const int64_t planes = x.size(0) * x.size(1);
    const int64_t HW = x.size(2) * x.size(3);
    if (planes == 0 || HW == 0) return y;
    instance_norm_divide_kernel<<<(unsigned)planes, kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), HW,
                                                                (float)eps, (float)divide_by);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) printf("instance_norm_divide_kernel: %s\n", cudaGetErrorString(err));
    TORCH_CHECK(err == cudaSuccess, "instance_norm_divide_kernel launch failed");
    return y;
}
"""

inorm_ext = load_inline(
    name="conv_instancenorm_divide",
    cpp_sources=inorm_cpp,
    cuda_sources=inorm_cuda,
    functions=["instance_norm_divide"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        x = self.conv(x).contiguous()
        return inorm_ext.instance_norm_divide(x, self.instance_norm.eps, float(self.divide_by))
