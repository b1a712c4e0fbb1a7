# task: level1/26_GELU_
# style: Triton; exact GELU with tl.erf; module-level _INV_SQRT2 constant; kernel in a small launcher class
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

_INV_SQRT2 = 1.0 / math.sqrt(2.0)


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, inv_sqrt2, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.erf(x * inv_sqrt2))
    tl.store(y_ptr + offs, y, mask=mask)


class _Launcher:
    BLOCK = 2048

    def __call__(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_kernel[(triton.cdiv(n, self.BLOCK),)](x, y, n, _INV_SQRT2, BLOCK=self.BLOCK, num_warps=8)
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self._launch = _Launcher()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._launch(x)
