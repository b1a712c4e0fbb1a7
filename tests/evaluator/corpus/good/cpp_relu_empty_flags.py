# task: 1_ReLU_small
# expect: ok
# cpp_relu.py with empty flag strings, as KernelBench's own load_inline example
# writes them (extra_cflags=[..., ""], extra_ldflags=[""]): the runner's
# load_inline must find the library the compile stage built (the same cache
# entry as cpp_relu.py: no second compile).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// fopen("/etc/passwd") and system("id") in a comment are only text.
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous (no fopen here)");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "float32 expected");
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = src[i] > 0.0f ? src[i] : 0.0f;  /* asm("nop") in a comment */
    }
    return out;
}
"""

relu_ext = load_inline(
    name="relu_ext",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-std=c++17", ""],
    extra_ldflags=[""],
    verbose=False,
)


class ModelNew(nn.Module):
    """ReLU in C++. Calling eval() or open() is mentioned only in this docstring."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
