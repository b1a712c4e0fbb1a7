# task: level1/95_CrossEntropyLoss.py
# expect: ok
# mode: gpu
# Cross entropy with class-index targets, a warp per row: each lane keeps
# an online (max, sum-of-exp) over its share of the 4096 logits, the lanes
# merge with __shfl_xor_sync, and lane 0 reads the single logit the int64
# target selects (bounds-checked with a device assert): loss = max +
# log(sum) - x[target]. Row losses go to an O(rows) buffer and a one-block
# kernel writes their mean into a 0-d tensor. <cassert>/<cfloat>/<cstdio>,
# CHECK_INPUT, printf on launch errors.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ce_cpp = "torch::Tensor cross_entropy_mean(torch::Tensor logits, torch::Tensor targets);"

ce_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

constexpr int kWarpsPerBlock = 8;

__global__ void ce_rows_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                               float* __restrict__ row_loss, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;  // whole warp
    const float* x = logits + row * cols;
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) {
        const float v = x[c];
        if (v > m) { s = s * expf(m - v) + 1.0f; m = v; }
        else s += expf(v - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = s * expf(m - mm) + s2 * expf(m2 - mm);
        m = mm;
    }
    if (lane == 0) {
        const int64_t t = targets[row];
        assert(t >= 0 && t < cols);
        row_loss[row] = (m + logf(s)) - x[t];
    }
}

__global__ void mean_kernel(const float* __restrict__ v, int64_t n, float* __restrict__ out) {
    __shared__ double sh[256];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += 256) acc += v[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int st = 128; st > 0; st >>= 1) {
        if (threadIdx.x < st) sh[threadIdx.x] += sh[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = (float)(sh[0] / (double)n);
}

torch::Tensor cross_entropy_mean(torch::Tensor logits, torch::Tensor targets) {
    CHECK_INPUT(logits);
    CHECK_INPUT(targets);
    TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == torch::kFloat32, "(batch, classes) float32 logits expected");
    TORCH_CHECK(targets.dim() == 1 && targets.scalar_type() == torch::kLong && targets.size(0) == logits.size(0),
                "(batch,) int64 class indices expected");
    const int64_t rows = logits.size(0), cols = logits.size(1);
    TORCH_CHECK(rows > 0 && cols > 0, "empty input");
    auto row_loss = torch::empty({rows}, logits.options());
    auto out = torch::empty({}, logits.options());
    const unsigned blocks = (unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    ce_rows_kernel<<<blocks, kWarpsPerBlock * 32>>>(logits.data_ptr<float>(), targets.data_ptr<int64_t>(),
                                                    row_loss.data_ptr<float>(), rows, cols);
    mean_kernel<<<1, 256>>>(row_loss.data_ptr<float>(), rows, out.data_ptr<float>());
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("cross_entropy_mean: %s\n", cudaGetErrorString(err));
        TORCH_CHECK(false, "cross_entropy_mean kernel launch failed: ", cudaGetErrorString(err));
    }
    return out;
}
"""

ce_ext = load_inline(
    name="cross_entropy_warp",
    cpp_sources=ce_cpp,
    cuda_sources=ce_cuda,
    functions=["cross_entropy_mean"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        return ce_ext.cross_entropy_mean(predictions.contiguous(), targets.contiguous())
