# task: level1/88_MinGPTNewGelu.py
# expect: ok
# mode: gpu
# minGPT's tanh GELU as an autotuned Triton kernel (three block sizes): the
# warm-up stage compiles and benchmarks every config, the runner must then
# find them in its Triton cache. tanh(u) is written as 1 - 2 / (exp(2u) + 1),
# which saturates cleanly to +-1 for large |u| (absolute error ~1e-7).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def new_gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * x * (1.0 + t)
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        new_gelu_kernel[grid](x, y, n)
        return y
