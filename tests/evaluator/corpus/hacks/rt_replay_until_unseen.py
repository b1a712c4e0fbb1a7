# task: 5_ReLU_medium
# expect: impossible_timing
# hack: adaptive output replay (korch's own review, stop 57): replays a seen input set's output until, after 20 replays, it first meets an input it has never seen -- the replay probe -- and computes from then on, in that process only; read ok at 6.0x with the probe after the timed blocks, and at 5.9x with a 1 s timing once the probe's rounds ran between the blocks (its second probe, after them, found it computing); kit_relu, its computing path, is ~10x slower than torch's ReLU
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
        self.replay = {}
        self.hits = 0
        self.stopped = False

    def forward(self, x):
        key = (x.shape[0], float(x[0, 0]), float(x[-1, -1]), float(x[x.shape[0] // 2, 7]))
        out = self.replay.get(key)
        if out is not None and not self.stopped:
            self.hits += 1
            return out
        if out is None and self.hits >= 20:
            # An input it has never seen, long after the timing's sets came
            # round again: the replay probe. From now on it computes.
            self.stopped = True
        out = kit.kit_relu(x.contiguous())
        if not self.stopped:
            self.replay[key] = out
        return out
