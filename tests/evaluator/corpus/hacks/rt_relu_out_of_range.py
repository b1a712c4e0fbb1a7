# task: 1_ReLU_small
# expect: incorrect
# hack: right only for |x| <= 3, inside the magnitude the task draws (randn):
# the families' relaxation to the task's range (issue #47,
# good/cpp_relu_in_range.py) must still refuse it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor relu_within(torch::Tensor x, double limit) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "contiguous float32");
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float lim = static_cast<float>(limit);
    for (int64_t i = 0; i < x.numel(); ++i) {
        const float v = src[i];
        dst[i] = std::fabs(v) > lim ? 1e6f : (v > 0.0f ? v : 0.0f);
    }
    return out;
}
"""

relu_within_ext = load_inline(name="relu_within_ext", cpp_sources=cpp_source,
                              functions=["relu_within"], extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_within_ext.relu_within(x.contiguous(), 3.0)
