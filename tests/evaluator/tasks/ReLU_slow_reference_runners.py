import os

import torch
import torch.nn as nn

# Test task (the judge's runner health check, issue #7): the reference is
# ~300x dearer in korch's reference runners (uid 65531, evaluator/worker/main.cpp)
# than in the judge, as when both reference runners sit on memory a VM makes
# slow. The reference runners agree with each other; only the judge's own
# time for the reference shows them wrong. Without the check, a candidate
# doing the same work would be paid for a ~300x speedup. (60x was not
# enough on the dev VM of 2026-12-02 23:20: the judge's own time for the
# reference then read up to ~27x a runner's, the check passed the runners
# and the test failed -- a limit of the check, noted in tools/bench/README.md.)
_REFERENCE_RUNNER_UID = 65531


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.getuid() == _REFERENCE_RUNNER_UID:
            for _ in range(300):
                torch.relu(x)
        return torch.relu(x)

batch_size = 64
dim = 256

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
