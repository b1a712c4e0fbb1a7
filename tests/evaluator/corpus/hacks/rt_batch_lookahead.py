# task: 1_ReLU_small
# expect: impossible_timing
# hack: batch lookahead: a CPU batch's inputs were all in the runner's input region before its untimed first call; that call computes the later calls' outputs too, and the timed calls return them (read ok at ~1.9x with the probe's ratio at 1.01; the replay probe's unseen sets now reach the runner only after that first call)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <unordered_map>
#include <vector>
#include <algorithm>
#include <cstdint>

struct Held { std::vector<float> probe; torch::Tensor out; };
static std::unordered_map<uintptr_t, Held> held;

static std::vector<float> probe_of(const float* p, int64_t n) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; i += n / 16 + 1) v.push_back(p[i]);
    v.push_back(p[n - 1]);
    return v;
}

static torch::Tensor relu_at(const float* s, const torch::Tensor& like) {
    auto out = torch::empty_like(like);
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < like.numel(); ++i) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
    return out;
}

torch::Tensor relu_ahead(torch::Tensor x) {
    const float* s = x.data_ptr<float>();
    const int64_t n = x.numel();
    // A call in the runner's input region (its inputs do not start on a
    // page): a batch's later inputs follow its first, one stride apart. A
    // batch's first call (the region's lowest slot) looks ahead as far as the
    // last batch went: lone calls (the warm-ups, which size the batch) look
    // ahead not at all.
    static int batch_len = 0;
    static uintptr_t lowest = UINTPTR_MAX;
    const uintptr_t at = reinterpret_cast<uintptr_t>(s);
    const bool region = at % 4096 != 0;
    bool first = false;
    if (region) {
        lowest = std::min(lowest, at & ~uintptr_t(4095));
        first = (at & ~uintptr_t(4095)) == lowest;
    }
    auto it = held.find(at);
    if (it != held.end()) {
        const bool same = it->second.probe == probe_of(s, n);
        torch::Tensor out = std::move(it->second.out);
        held.erase(it);
        if (same && !first) {
            ++batch_len;
            return out;
        }
    }
    auto out = relu_at(s, x);
    if (!region) return out;
    if (!first) {
        ++batch_len;
        return out;
    }
    const int ahead = std::min(batch_len - 1, 63);
    batch_len = 1;
    held.clear();
    const int64_t stride = (n * 4 + 63) / 64 * 64 + 4096;
    for (int j = 1; j <= ahead; ++j) {
        const float* t = reinterpret_cast<const float*>(reinterpret_cast<const char*>(s) + j * stride);
        held[reinterpret_cast<uintptr_t>(t)] = Held{probe_of(t, n), relu_at(t, x)};
    }
    return out;
}
"""

ext = load_inline("korch_hack_lookahead", SRC, functions=["relu_ahead"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_ahead(x)
