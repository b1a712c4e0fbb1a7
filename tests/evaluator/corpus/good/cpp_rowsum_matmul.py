# task: 4_RowSum_small
# expect: ok
# Row sums as a matrix-vector product through at::matmul, built in __init__
# with sources given as a list and "".join.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

PARTS = (
    "#include <torch/extension.h>\n",
    "torch::Tensor rowsum_mv(torch::Tensor x) {\n",
    "    auto ones = at::ones({x.size(1), 1}, x.options());\n",
    "    return at::matmul(x, ones).squeeze(1);\n",
    "}\n",
)
SOURCE = "".join(PARTS)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="rowsum_mv_ext", cpp_sources=[SOURCE],
                               functions=["rowsum_mv"], extra_cflags=["-O2"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.rowsum_mv(x.contiguous())
