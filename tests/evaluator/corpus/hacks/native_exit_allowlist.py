# task: 1_ReLU_small
# expect: worker_crash
# hack: the `exit` allowlist addition attacked (issue #47: native `exit` is allowed because
# CUDA objects that print on an error path import it). The kernel is right, but after its
# 40th call it ends its own process with exit(0) -- in the middle of the timing, where a
# dead runner could pass for the host's fault and earn the candidate a run again. The
# runner's death after candidate code ran is the candidate's: worker_crash without the
# "infrastructure: " mark (Report::host_fault is false), so it is final: one run.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cstdlib>

torch::Tensor relu_then_leave(torch::Tensor x) {
    static int calls = 0;
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "float32, contiguous");
    if (++calls > 40) std::exit(0);
    auto out = torch::empty_like(x);
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
    return out;
}
"""

ext = load_inline(name="korch_hack_exit", cpp_sources=src, functions=["relu_then_leave"],
                  extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        return ext.relu_then_leave(x.contiguous())
