# task: level1/88_MinGPTNewGelu.py
# expect: rule_violation|incorrect
# mode: gpu
# hack: an fp32 task computed in half precision (x.half() into a Triton
# kernel, .float() on the way out) for twice the bandwidth. Refused
# statically under the strict tolerance (precision_downgrade); were it let
# through, fp16's ~1e-3 relative error fails atol=rtol=1e-4: incorrect.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def new_gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    y = 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xh = x.half().contiguous()
        yh = torch.empty_like(xh)
        n = xh.numel()
        new_gelu_kernel[(triton.cdiv(n, 1024),)](xh, yh, n, BLOCK=1024)
        return yh.float()
