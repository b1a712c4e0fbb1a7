# task: level1/21_Sigmoid
# style: Triton; one elementwise kernel for several activations selected by a parameter named `type`
import torch
import torch.nn as nn
import triton
import triton.language as tl

_ACTIVATIONS = {"sigmoid": 0, "relu": 1, "tanh_via_sigmoid": 2}


@triton.jit
def _activation_kernel(x_ptr, y_ptr, n, KIND: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if KIND == 0:
        y = 1.0 / (1.0 + tl.exp(-x))
    elif KIND == 1:
        y = tl.maximum(x, 0.0)
    else:
        y = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    tl.store(y_ptr + offs, y, mask=mask)


def activation(x, type="sigmoid", block=1024):
    kind = _ACTIVATIONS[type]
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _activation_kernel[(triton.cdiv(n, block),)](x, y, n, KIND=kind, BLOCK=block)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return activation(x, type="sigmoid")
