import torch
import torch.nn as nn

# Test task (issue #7): a ReLU large enough that the CPU judge times it in
# lone calls (batch 1, well over timing_batch_us = 200 us on any machine this
# runs on) with several calls per block, so each block opens with an untimed
# call on both sides; and whose 36 MB output is over glibc's largest mmap
# threshold (32 MB), so that a timing process that unmapped freed memory
# would fault 9,217 pages on every call (korch_runner.keep_freed_memory).


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 3072
dim = 3072


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
