# task: level1/88_MinGPTNewGelu.py
# expect: rule_violation
# mode: gpu
# hack: the Triton kernel is launched inside `with torch.cuda.stream(side)`
# on a torch.cuda.Stream the timing events never see. Caught statically:
# streams_events_graphs.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def new_gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    y = 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            new_gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
