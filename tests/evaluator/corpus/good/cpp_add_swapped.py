# task: 2_Add_small
# expect: ok
# The cpp_add.py kernel (same sources: one compile-cache entry) with its
# operands swapped.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

HEADER = "#include <torch/extension.h>\n"

KERNEL = """
torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "shape mismatch");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = at::empty_like(ac);
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = ac.numel();
    for (int64_t i = 0; i < n; ++i) {
        po[i] = pa[i] + pb[i];
    }
    return out;
}
"""

add_ext = load_inline(
    name="add_ext",
    cpp_sources=[HEADER + KERNEL],
    functions=["add_forward"],
    extra_cflags=["-O2", "-Wall"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a + b == b + a: the kernel is called with its operands swapped.
        return add_ext.add_forward(b, a)
