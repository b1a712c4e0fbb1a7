# task: level3/20_MobileNetV2
# style: CUDA load_inline; _make_divisible and _inverted_residual_block as private methods; ReLU6 kernel module;
#        the reference's weight-init loop over self.modules() kept verbatim
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu6_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu6_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        y[i] = fminf(fmaxf(x[i], 0.0f), 6.0f);
    }
}

torch::Tensor relu6_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 8192);
    relu6_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

relu6_ext = load_inline(
    name="relu6_ext",
    cpp_sources="torch::Tensor relu6_forward(torch::Tensor x);",
    cuda_sources=relu6_source,
    functions=["relu6_forward"],
)


class ReLU6Cuda(nn.Module):
    def forward(self, x):
        return relu6_ext.relu6_forward(x)


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super(ModelNew, self).__init__()
        input_channel = 32
        last_channel = 1280
        inverted_residual_setting = [
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]
        features = [nn.Conv2d(3, input_channel, 3, 2, 1, bias=False),
                    nn.BatchNorm2d(input_channel),
                    ReLU6Cuda()]
        for t, c, n, s in inverted_residual_setting:
            output_channel = self._make_divisible(c, 8)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(self._inverted_residual_block(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(nn.Conv2d(input_channel, last_channel, 1, 1, 0, bias=False))
        features.append(nn.BatchNorm2d(last_channel))
        features.append(ReLU6Cuda())
        features.append(nn.AdaptiveAvgPool2d((1, 1)))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(
            nn.Dropout(0.0),
            nn.Linear(last_channel, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    @staticmethod
    def _make_divisible(v, divisor, min_value=None):
        if min_value is None:
            min_value = divisor
        new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    def _inverted_residual_block(self, inp, oup, stride, expand_ratio):
        # As in the reference, the block is a plain sequence (no residual connection is applied).
        hidden_dim = int(inp * expand_ratio)
        layers = []
        if expand_ratio != 1:
            layers.append(nn.Conv2d(inp, hidden_dim, 1, 1, 0, bias=False))
            layers.append(nn.BatchNorm2d(hidden_dim))
            layers.append(ReLU6Cuda())
        layers.extend([
            nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
            nn.BatchNorm2d(hidden_dim),
            ReLU6Cuda(),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ])
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.classifier(x)
