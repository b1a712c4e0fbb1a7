# task: level2/57_Conv2d_ReLU_HardSwish
# style: Triton; fused ReLU + x * clamp((x + 3) / 6, 0, 1); autotuned block size; _fused name
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 4096}, num_warps=8)],
    key=["n"],
)
@triton.jit
def _fused_relu_hardswish(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    x = tl.maximum(x, 0.0)
    gate = tl.minimum(tl.maximum((x + 3.0) / 6.0, 0.0), 1.0)
    tl.store(y_ptr + offs, x * gate, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        y = torch.empty_like(x)
        n = x.numel()
        _fused_relu_hardswish[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
