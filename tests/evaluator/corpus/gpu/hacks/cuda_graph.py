# task: level1/88_MinGPTNewGelu.py
# expect: rule_violation
# mode: gpu
# hack: the kernel is captured once into a torch.cuda.CUDAGraph on a static
# input buffer and replayed afterwards (the replay hides launch costs the
# reference pays, and a graph can be replayed on a stream of its own).
# Refused statically: streams_events_graphs.
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
        self.graph = None
        self.static_x = None
        self.static_y = None

    def forward(self, x):
        if self.graph is None:
            self.static_x = x.clone()
            self.static_y = torch.empty_like(x)
            n = x.numel()
            new_gelu_kernel[(triton.cdiv(n, 1024),)](self.static_x, self.static_y, n, BLOCK=1024)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                new_gelu_kernel[(triton.cdiv(n, 1024),)](self.static_x, self.static_y, n, BLOCK=1024)
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y.clone()
