# task: level3/1_MLP
# style: Triton; timm-style block with act_layer=nn.ReLU default (a library class as a value); fused Linear+ReLU GEMM
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def _fused_linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         RELU: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class _LinearAct(nn.Module):
    def __init__(self, in_features, out_features, act_layer=nn.ReLU):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.fuse_relu = act_layer is nn.ReLU
        self.act = None if act_layer is None or self.fuse_relu else act_layer()

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.fc.out_features
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
        _fused_linear_kernel[grid](x, self.fc.weight, self.fc.bias, y, M, N, K, RELU=self.fuse_relu)
        return y if self.act is None else self.act(y)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(_LinearAct(current, size, act_layer=nn.ReLU))
            current = size
        layers.append(_LinearAct(current, output_size, act_layer=None))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)
