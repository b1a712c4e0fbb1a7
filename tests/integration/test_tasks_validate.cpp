// `korch tasks validate` on tasks a candidate could pass without computing
// anything, or that no candidate can match: the real CLI and the real
// sandboxed reference worker.
#include <gtest/gtest.h>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

std::string task_file(const std::string& forward) {
  return "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
         "        super().__init__()\n\n    def forward(self, x):\n        return " +
         forward +
         "\n\ndef get_inputs():\n    return [torch.randn(16, 32)]\n\ndef get_init_inputs():\n    "
         "return []\n";
}

TEST(TasksValidate, FlagsConstantAndStochasticTasksAndPassesAGoodOne) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) KORCH_SKIP_OR_FAIL("korch-worker was not built");
  TempDir dir;
  auto d = dir.path().string();
  write_text(d + "/1_Constant.py", task_file("torch.zeros_like(x)"));
  write_text(d + "/2_Noisy.py", task_file("x + torch.rand(x.shape)"));
  write_text(d + "/3_Relu.py", task_file("torch.relu(x)"));
  // Issue #47: outputs that are float32 rounding noise of the reference. An
  // exact 0 computed as a mean of centred values (L2/23's GroupNorm then
  // mean), and an exact 0.1 left by cancelling terms of 1e4.
  write_text(d + "/4_CentredMean.py", task_file("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)"));
  write_text(d + "/5_Cancelled.py", task_file("(x * 1e4 + 0.1) - x * 1e4"));
  auto [rc, out] = run_capture({KORCH_BIN, "tasks", "validate", d, "--cache-dir",
                                std::string(KORCH_TEST_CACHE) + "/validate"},
                               d);
  EXPECT_EQ(rc, 1) << out;  // some task was flagged
  EXPECT_NE(out.find("FLAGGED 1_Constant"), std::string::npos) << out;
  EXPECT_NE(out.find("nearly_constant"), std::string::npos) << out;
  EXPECT_NE(out.find("input_independent"), std::string::npos) << out;
  EXPECT_NE(out.find("FLAGGED 2_Noisy"), std::string::npos) << out;
  EXPECT_NE(out.find("nondeterministic"), std::string::npos) << out;
  EXPECT_NE(out.find("ok      3_Relu"), std::string::npos) << out;
  for (const char* noisy : {"4_CentredMean", "5_Cancelled"}) {
    const auto at = out.find(std::string("FLAGGED ") + noisy);
    ASSERT_NE(at, std::string::npos) << noisy << "\n" << out;
    const auto next = out.find("FLAGGED", at + 1);
    EXPECT_NE(out.substr(at, next == std::string::npos ? std::string::npos : next - at)
                  .find("rounding_noise"),
              std::string::npos)
        << noisy << "\n"
        << out;
  }
  // The constant and the stochastic task are not called rounding noise.
  EXPECT_EQ(out.find("rounding_noise", out.find("FLAGGED 1_Constant")),
            out.find("rounding_noise", out.find("FLAGGED 4_CentredMean")))
      << out;
}

}  // namespace
}  // namespace korch::testing
