# task: level2/6_Conv3d_Softmax_MaxPool_MaxPool.py
# expect: ok
# mode: gpu
# torch's Conv3d, then channel softmax and two MaxPool3d(k) in one Triton
# kernel. Two floor-mode pools of kernel = stride = k are one k*k window:
# output voxel o reads input voxels [k*k*o, k*k*o + k*k) on each axis, all
# in bounds. A program owns 64 output voxels of one sample and all 16
# channels; for each of the (k*k)^3 window offsets it loads the (16, 64)
# tile, takes the channel softmax and keeps the running maximum.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_window_max_kernel(x_ptr, y_ptr, C, D, H, W, OD, OH, OW,
                              WIN: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(axis=0).to(tl.int64)
    pid_p = tl.program_id(axis=1)
    ch = tl.arange(0, BLOCK_C)
    p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    n_out = OD * OH * OW
    cmask = ch < C
    pmask = p < n_out
    mask = cmask[:, None] & pmask[None, :]
    od = p // (OH * OW)
    oh = (p // OW) % OH
    ow = p % OW
    DHW = D * H * W
    xb = x_ptr + b * C * DHW + ch[:, None].to(tl.int64) * DHW
    best = tl.full((BLOCK_C, BLOCK_P), -float("inf"), dtype=tl.float32)
    for i in tl.static_range(WIN * WIN * WIN):
        dz = i // (WIN * WIN)
        dy = (i // WIN) % WIN
        dx = i % WIN
        sp = ((od * WIN + dz) * H + (oh * WIN + dy)) * W + (ow * WIN + dx)
        v = tl.load(xb + sp[None, :], mask=mask, other=0.0)
        v = tl.where(cmask[:, None], v, -float("inf"))
        mx = tl.max(v, axis=0)
        e = tl.exp(v - mx[None, :])
        sm = e / tl.sum(e, axis=0)[None, :]
        best = tl.maximum(best, sm)
    out_off = b * C * n_out + ch[:, None] * n_out + p[None, :]
    tl.store(y_ptr + out_off, best, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)
        self.k = pool_kernel_size

    def forward(self, x):
        x = self.conv(x).contiguous()
        B, C, D, H, W = x.shape
        k = self.k
        OD, OH, OW = (D // k) // k, (H // k) // k, (W // k) // k
        y = torch.empty((B, C, OD, OH, OW), dtype=x.dtype, device=x.device)
        BLOCK_P = 64
        grid = (B, triton.cdiv(OD * OH * OW, BLOCK_P))
        softmax_window_max_kernel[grid](x, y, C, D, H, W, OD, OH, OW, WIN=k * k,
                                        BLOCK_C=triton.next_power_of_2(C), BLOCK_P=BLOCK_P,
                                        num_warps=4)
        return y
