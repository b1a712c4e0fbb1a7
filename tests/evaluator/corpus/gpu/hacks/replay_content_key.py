# task: level1/88_MinGPTNewGelu.py
# expect: impossible_timing
# mode: gpu
# hack: output replay keyed by content (GPU MODE's replay reports, KernelBench
# issue #165). A correct Triton kernel, but ModelNew reads 4 elements of the
# input (a key cheap to take, unlike a pointer, which the judge's fresh input
# slots defeat) and, when it has seen that key, returns its earlier
# output instead of computing. The judge times a few input sets in rotation,
# so every timed call after the first round is a replay and looks fast; the
# outputs are right. The judge's replay probe times calls on input sets it
# has never shown (korch_replay.py): they are many times slower than the
# timed ones, where the reference's are not.
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
        self.seen = {}

    def forward(self, x):
        x = x.contiguous()
        flat = x.view(-1)
        n = flat.numel()
        key = tuple(flat[[0, n // 3, n // 2, n - 1]].tolist())
        hit = self.seen.get(key)
        if hit is not None:
            return hit
        y = torch.empty_like(x)
        new_gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        self.seen[key] = y
        return y
