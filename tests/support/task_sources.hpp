#pragma once
// KernelBench-shaped task sources for tests that write their own task folder
// (config/tasks.hpp loads them: a Model, get_inputs, get_init_inputs).
namespace korch::testing {

// A one-op task (torch.relu on a 4x4 input).
inline constexpr const char* k_relu_task_source =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x)\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(4, 4)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

}  // namespace korch::testing
