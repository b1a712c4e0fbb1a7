# task: level3/11_VGG16
# style: Triton; _make_features(cfg) helper building the same layer sequence with a Triton ReLU module (_TritonReLU)
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


@triton.jit
def _relu_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class _TritonReLU(nn.Module):
    """In-place ReLU on an activation this network produced (never on the caller's input)."""

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        _relu_inplace_kernel[(triton.cdiv(n, 2048),)](x, n, BLOCK=2048, num_warps=8)
        return x


def _make_features(cfg, in_channels=3):
    layers = []
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
            layers.append(_TritonReLU())
            in_channels = v
    return nn.Sequential(*layers)


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super(ModelNew, self).__init__()
        self.features = _make_features(_CFG)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            _TritonReLU(),
            nn.Dropout(p=0.0),
            nn.Linear(4096, 4096),
            _TritonReLU(),
            nn.Dropout(p=0.0),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)
