# task: 1_ReLU_small
# expect: runtime_error
# hack: claims the host's fault: raises torch's out-of-memory text from forward, for a judge that blamed the host for it whenever others held memory (issue #47; CpuEvaluatorFaults runs it under the fake CUDA layer with 4 GiB held outside)
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total "
                           "capacity of 79.10 GiB of which 250.44 MiB is free. Of the allocated "
                           "memory 4.00 GiB is allocated by PyTorch")
