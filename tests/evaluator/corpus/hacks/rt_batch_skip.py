# task: 1_ReLU_small
# expect: incorrect
# hack: batch-and-skip (GPU MODE's reports): computes one call in four and returns the previous output for the other three, a quarter of the work on average
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
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls = self.calls + 1
        if self.last is None or self.calls % 4 == 1:
            self.last = kit.kit_relu(x.contiguous())
        return self.last
