# task: 3_Scale_small
# expect: ok
# x * 2.5 + bias in C++; the scale is baked in with -DSCALE and an f-string.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SCALE = 2.5
UNROLL = 4

scale_source = f"""
#include <torch/extension.h>
#include <cstdint>

#ifndef SCALE
#define SCALE {SCALE}f
#endif

torch::Tensor scale_bias(torch::Tensor x, double bias) {{
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = xc.numel();
    const float b = static_cast<float>(bias);
    int64_t i = 0;
    for (; i + {UNROLL} <= n; i += {UNROLL}) {{
        for (int k = 0; k < {UNROLL}; ++k) dst[i + k] = src[i + k] * SCALE + b;
    }}
    for (; i < n; ++i) dst[i] = src[i] * SCALE + b;
    return out;
}}
"""

scale_ext = load_inline(
    name="scale_ext",
    cpp_sources=scale_source,
    functions=["scale_bias"],
    extra_cflags=["-O3", "-DSCALE=2.5f", "-funroll-loops"],
)


class ModelNew(nn.Module):
    def __init__(self, bias: float):
        super().__init__()
        self.bias = float(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale_ext.scale_bias(x, self.bias)
