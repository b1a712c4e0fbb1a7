# task: 1_ReLU_small
# expect: ok
# A C++ ReLU that is right on every value the task draws (randn: |x| < 6
# with probability 1 - 2e-9 an element) and wrong beyond |x| = 16: the
# families keep the task's magnitude (issue #47: two fused kernels failed the
# 'signed' family only on +-32). hacks/rt_relu_out_of_range.py, the same
# kernel wrong beyond |x| = 3, must stay incorrect.
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
        return relu_within_ext.relu_within(x.contiguous(), 16.0)
