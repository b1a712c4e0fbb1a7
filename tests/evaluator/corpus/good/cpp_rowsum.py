# task: 4_RowSum_small
# expect: ok
# Row sums in C++ with a std::vector of partial sums (softmax-style row loop).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rowsum_cpp = """
#include <torch/extension.h>
#include <vector>
#include <cmath>

torch::Tensor rowsum(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "2-D input expected");
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    auto out = at::zeros({rows}, xc.options());
    const float* src = xc.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    std::vector<double> acc(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += src[r * cols + c];
        acc[r] = s;
        dst[r] = static_cast<float>(acc[r]);
    }
    return out;
}
"""

rowsum_ext = load_inline(name="rowsum_ext", cpp_sources=rowsum_cpp, functions=["rowsum"],
                         extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rowsum_ext.rowsum(x)
