# task: level2/24_Conv3d_Min_Softmax.py
# expect: ok
# mode: gpu
# torch's Conv3d, then min over depth and softmax over channels in one
# Triton kernel. A program owns 128 output pixels of one sample and all 24
# channels as a (32, 128) tile (channels padded to 32): it walks the depth
# keeping the running minimum, then takes the channel softmax of the tile
# (padding lanes set to -inf) and stores the (B, C, H, W) result.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def depthmin_channel_softmax_kernel(x_ptr, y_ptr, C, D, HW, BLOCK_C: tl.constexpr,
                                    BLOCK_P: tl.constexpr):
    b = tl.program_id(axis=0).to(tl.int64)
    pid_p = tl.program_id(axis=1)
    ch = tl.arange(0, BLOCK_C)
    px = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    cmask = ch < C
    mask = cmask[:, None] & (px[None, :] < HW)
    base = x_ptr + b * C * D * HW + ch[:, None].to(tl.int64) * (D * HW) + px[None, :]
    mn = tl.full((BLOCK_C, BLOCK_P), float("inf"), dtype=tl.float32)
    for d in range(0, D):
        v = tl.load(base + d * HW, mask=mask, other=float("inf"))
        mn = tl.minimum(mn, v)
    mn = tl.where(cmask[:, None], mn, -float("inf"))
    mx = tl.max(mn, axis=0)
    e = tl.exp(mn - mx[None, :])
    e = tl.where(cmask[:, None], e, 0.0)
    s = tl.sum(e, axis=0)
    out = e / s[None, :]
    tl.store(y_ptr + b * C * HW + ch[:, None] * HW + px[None, :], out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        x = self.conv(x).contiguous()
        if self.dim != 2:
            raise ValueError("this kernel reduces the depth dimension (dim=2)")
        B, C, D, H, W = x.shape
        y = torch.empty((B, C, H, W), dtype=x.dtype, device=x.device)
        BLOCK_P = 128
        grid = (B, triton.cdiv(H * W, BLOCK_P))
        depthmin_channel_softmax_kernel[grid](x, y, C, D, H * W,
                                              BLOCK_C=triton.next_power_of_2(C), BLOCK_P=BLOCK_P,
                                              num_warps=4)
        return y
