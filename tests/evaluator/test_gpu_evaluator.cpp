// The GPU evaluator on the corpus files marked `# mode: gpu` (whose tasks are
// in examples/tasks or tests/evaluator/tasks): each gets its `# expect:`
// verdict, every evaluation names the GPU it was leased, leases of one GPU
// never overlap, and a scored SUBMIT was timed by four runners a side.
// Label `gpu`. It is skipped only where the host has no NVIDIA device (no
// /dev/nvidia0 or /dev/nvidiactl: the CPU CI machine). Where one exists, a GPU
// evaluator that does not start (a broken worker build, a CPU-only torch) is
// a failure, never a skip. The KernelBench GPU corpus runs through
// scripts/gpu/suite.sh corpus on the H200.
#include <nlohmann/json.hpp>

#include "tests/evaluator/eval_test_support.hpp"

namespace korch::evaluator::testing {
namespace {

TEST(GpuEvaluatorCorpus, GpuFilesGetTheirVerdictsOnLeasedGpus) {
  config::EvaluatorConfig cfg = test_config(2, 120);
  cfg.mode = config::EvalMode::gpu;
  auto ev = make_cpu_evaluator(cfg, k_cache_dir);
  if (!ev) {
    std::error_code ec;
    if (!std::filesystem::exists("/dev/nvidia0", ec) &&
        !std::filesystem::exists("/dev/nvidiactl", ec))
      GTEST_SKIP() << "no NVIDIA device on this host: " << ev.error().message;
    FAIL() << "an NVIDIA device is present but the GPU evaluator did not start: "
           << ev.error().message;
  }
  std::vector<std::pair<CorpusFile, std::future<Report>>> runs;
  for (const char* sub : {"good", "hacks"}) {
    for (auto& f : corpus(sub)) {
      if (f.mode != "gpu" || f.expect.empty()) continue;
      auto task = task_by_stem(f.task);
      if (!task) continue;  // a KernelBench task: scripts/gpu/suite.sh corpus
      runs.emplace_back(f, submit(**ev, make_request(f, *task, Mode::submit)));
    }
  }
  ASSERT_FALSE(runs.empty());
  for (auto& [f, fut] : runs) {
    Report r = fut.get();
    EXPECT_EQ(to_string(r.status), f.expect) << f.name << ": " << r.error.substr(0, 600);
    EXPECT_EQ(r.mode, "gpu");
    auto ev_json = nlohmann::json::parse(r.evidence_json, nullptr, false);
    ASSERT_FALSE(ev_json.is_discarded()) << f.name;
    if (ev_json.contains("measure")) {
      EXPECT_TRUE(ev_json.contains("gpu")) << f.name;
      EXPECT_GT(ev_json["stages"].value("lease_s", 0.0), 0.0) << f.name;
    }
    // A GPU SUBMIT is timed in four runner processes a side (these tasks'
    // models fit the budget many times over), their spread from 3 + 3
    // degrees of freedom (issue #7).
    if (r.status == Verdict::ok) {
      const auto t = ev_json["measure"].value("timing", nlohmann::json::object());
      EXPECT_EQ(t.value("reference_runners", 0), 4) << f.name;
      EXPECT_EQ(t.value("candidate_runners", 0), 4) << f.name;
      EXPECT_EQ(t.value("process_spread", nlohmann::json::object()).value("dof", 0), 6) << f.name;
    }
  }
  (*ev)->shutdown();
}

}  // namespace
}  // namespace korch::evaluator::testing
