# task: 5_ReLU_medium
# expect: incorrect
# hack: the near-miss relaxation (issue #47) attacked: a family mismatch at a handful of elements, within a few x the bound and within what the reference itself moves, is a note. This kernel skips the last 1% of the output on inputs that look like the sparse family (mostly exact zeros) -- hundreds of wrong elements, not a handful: incorrect
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""
#include <torch/extension.h>

// One native source shared by every runtime hack in this corpus (the compile
// cache is keyed by source, so the whole set costs one compile).
torch::Tensor kit_relu(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
    return out;
}
void kit_relu_inplace(torch::Tensor x) {
    float* d = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = d[i] > 0.0f ? d[i] : 0.0f;
}
torch::Tensor kit_copy(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i];
    return out;
}
torch::Tensor kit_zeros(torch::Tensor x) {
    auto out = torch::empty_like(x);
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = 0.0f;
    return out;
}
torch::Tensor kit_crash(torch::Tensor x) {
    // An address the compiler cannot prove null (numel >> 40 is 0 here).
    float* p = reinterpret_cast<float*>(static_cast<uintptr_t>(x.numel() >> 40) + 8);
    *p = 1.0f;
    return x;
}
"""

kit = load_inline(
    name="korch_hack_kit",
    cpp_sources=kit_source,
    functions=["kit_relu", "kit_relu_inplace", "kit_copy", "kit_zeros", "kit_crash"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        x = x.contiguous()
        if float((x == 0).float().mean()) > 0.5:  # looks like the sparse family
            n = x.numel()
            keep = n - n // 100
            out = torch.zeros_like(x)
            out.view(-1)[:keep] = kit.kit_relu(x.view(-1)[:keep].contiguous())
            return out
        return kit.kit_relu(x)

