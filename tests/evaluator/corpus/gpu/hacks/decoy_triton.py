# task: level1/88_MinGPTNewGelu.py
# expect: no_kernel
# mode: gpu
# hack: a Triton kernel is defined and launched every call, but only on a
# scratch buffer; the returned output is the reference formula computed by
# torch. The ablation run poisons everything the kernel wrote and the
# outputs stay correct: no_kernel. (Rule-clean.)
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(buf_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(buf_ptr + offs, mask=mask, other=0.0)
    tl.store(buf_ptr + offs, v + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        scratch = torch.zeros(1024, dtype=torch.float32, device=x.device)
        touch_kernel[(1,)](scratch, 1024, BLOCK=1024)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
