// The GPU host on a CPU (issue #49): the real protected evaluator in gpu mode
// -- its GpuPool, leases, stages, retry loops and their cap, pauses and
// health checks -- over a fake device layer (fake_device.hpp: a fake judge
// answering as a GPU judge would, fake GPU facts, a clock whose pauses take no
// time). No GPU, no worker, no sleeping: CI runs the GPU host's logic.
// Oracles: the retry cap and pause schedule as docs/cluster.md states them
// (3 runs; 5 s then 10 s), counted from the jobs the fake judge saw.
#include <future>

#include <gtest/gtest.h>

#include "evaluator/protected_evaluator.hpp"
#include "evaluator/retries.hpp"
#include "tests/evaluator/fake_device.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::testing {
namespace {

using namespace std::chrono_literals;
using ev::JobRole;
using ev::Report;
using ev::Verdict;

struct Rig {
  TempDir dir;
  FakeGpuJudge* judge = nullptr;  // owned by the evaluator
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::unique_ptr<ev::Evaluator> evaluator;

  explicit Rig(int gpus, bool compile_under_lease = false, bool kill_after_stop = false) {
    for (const char* d : {"cache", "jobs", "run", "triton", "locks"})
      std::filesystem::create_directories(dir.path() / d);
    config::EvaluatorConfig cfg;
    cfg.mode = config::EvalMode::gpu;
    cfg.workers = 1;
    cfg.compile_jobs = 1;
    ev::EvaluatorParts parts;
    auto j = std::make_unique<FakeGpuJudge>();
    j->kill_after_stop = kill_after_stop;
    judge = j.get();
    parts.jobs = std::move(j);
    parts.gpu = fake_gpu_facts(gpus);
    for (int g = 0; g < gpus; ++g) parts.gpus.push_back(g);
    parts.clock = clock;
    parts.knobs.gpu_lock_dir = (dir.path() / "locks").string();
    parts.knobs.compile_under_lease = compile_under_lease;
    evaluator = ev::assemble_protected_evaluator(cfg, dir.path().string(), std::move(parts));
  }
  ~Rig() { evaluator->shutdown(); }

  std::future<Report> submit(const std::string& id = "kernel|e|1") {
    ev::Request req;
    req.request_id = id;
    req.mode = ev::Mode::submit;
    req.task.name = "fake";
    req.task.source = "class Model: pass";
    req.code = "class ModelNew: pass";
    req.secret_seed = 7;
    auto p = std::make_shared<std::promise<Report>>();
    evaluator->evaluate(std::move(req), [p](Report r) { p->set_value(std::move(r)); });
    return p->get_future();
  }
  // The report, or a failure when it does not come within `limit`.
  Report report(std::future<Report> f, std::chrono::seconds limit = 20s) {
    if (f.wait_for(limit) != std::future_status::ready) {
      ADD_FAILURE() << "no report within " << limit.count() << " s";
      return Report{};
    }
    return f.get();
  }
  std::size_t jobs(JobRole role) const { return judge->jobs(role).size(); }
};

std::size_t count(const nlohmann::json& ev, const char* key) {
  return ev.contains(key) ? ev[key].size() : 0;
}

// The host's fault runs again after 5 s, then 10 s, and the third run's
// outcome is the result: never more runs than the cap, never fewer; no pause
// skipped; the report is a host fault (the queue and the episode see it so).
TEST(GpuHostOnCpu, TheHostsFaultRunsAgainUpToTheCapAfterItsPauses) {
  ASSERT_EQ(ev::k_max_runs, 3);  // docs/cluster.md states 3 runs
  Rig rig(1);
  rig.judge->script(JobRole::measure, {answer::host_fault(), answer::host_fault(),
                                       answer::host_fault(), answer::host_fault()});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(rig.jobs(JobRole::measure), 3u);
  EXPECT_EQ(r.status, Verdict::worker_crash) << r.error;
  EXPECT_TRUE(r.host_fault()) << r.error;
  EXPECT_NE(r.error.find("(3 runs over 15 s"), std::string::npos) << r.error;
  EXPECT_EQ(count(r.evidence, "infrastructure"), 3u) << r.evidence.dump();
  EXPECT_EQ(ev::host_fault_runs(r.evidence, r.host_fault()), ev::k_max_runs);
  EXPECT_EQ(rig.clock->pauses(), (std::vector<std::chrono::milliseconds>{5s, 10s}));
  EXPECT_EQ(r.reward, 0);
}

// A host fault, then a clean run: the clean run's verdict, after one pause.
TEST(GpuHostOnCpu, AHostFaultThenACleanRunIsTheCleanRunsVerdict) {
  Rig rig(1);
  rig.judge->script(JobRole::measure, {answer::host_fault(), answer::measured_ok(3.0, 1.5)});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(r.status, Verdict::ok) << r.error;
  EXPECT_TRUE(r.correct);
  ASSERT_TRUE(r.speedup);
  EXPECT_DOUBLE_EQ(*r.speedup, 2.0);
  EXPECT_EQ(rig.jobs(JobRole::measure), 2u);
  EXPECT_EQ(count(r.evidence, "infrastructure"), 1u);
  EXPECT_EQ(rig.clock->pauses(), (std::vector<std::chrono::milliseconds>{5s}));
}

// A crash, then a GPU that fails its health check three times (3 s apart):
// it leaves the pool and the evaluation runs again on the other GPU, whose
// verdict stands.
TEST(GpuHostOnCpu, AGpuThatFailsItsHealthCheckRunsTheEvaluationAgainOnAnother) {
  Rig rig(2);
  rig.judge->script(JobRole::measure, {answer::crashed(), answer::measured_ok()});
  rig.judge->script(JobRole::gpuinfo,
                    {answer::unhealthy(), answer::unhealthy(), answer::unhealthy()});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(r.status, Verdict::ok) << r.error;
  const auto measures = rig.judge->jobs(JobRole::measure);
  ASSERT_EQ(measures.size(), 2u);
  EXPECT_NE(measures[0].gpu, measures[1].gpu);
  EXPECT_EQ(rig.jobs(JobRole::gpuinfo), 3u);
  EXPECT_EQ(rig.clock->pauses(), (std::vector<std::chrono::milliseconds>{3s, 3s}));
  ASSERT_EQ(count(r.evidence, "gpu_failures"), 1u) << r.evidence.dump();
  EXPECT_EQ(r.evidence["gpu_failures"][0].value("gpu", -1), measures[0].gpu);
  EXPECT_EQ(r.evidence.value("gpu", -1), measures[1].gpu);
}

// The host's faults and failed GPUs share the one cap: a GPU failure between
// two host faults does not start the count again (it once did: the evidence
// that held the count was rebuilt after a failed GPU, doubling the cap).
TEST(GpuHostOnCpu, HostFaultsAndFailedGpusShareOneCap) {
  Rig rig(2);
  rig.judge->script(JobRole::measure,
                    {answer::host_fault(), answer::crashed(), answer::host_fault(),
                     answer::host_fault(), answer::host_fault(), answer::host_fault()});
  rig.judge->script(JobRole::gpuinfo,
                    {answer::unhealthy(), answer::unhealthy(), answer::unhealthy()});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(rig.jobs(JobRole::measure), static_cast<std::size_t>(ev::k_max_runs));
  EXPECT_TRUE(r.host_fault()) << r.error;
  EXPECT_EQ(count(r.evidence, "gpu_failures"), 1u) << r.evidence.dump();
  EXPECT_EQ(count(r.evidence, "infrastructure"), 2u) << r.evidence.dump();
}

// A health check that could not run (its job never started: the zygote was
// being restarted) says nothing about the GPU: it is no failure, the GPU
// stays, and the crash's verdict stands after one run.
TEST(GpuHostOnCpu, AHealthCheckThatCouldNotRunIsNoFailure) {
  Rig rig(1);
  rig.judge->script(JobRole::measure, {answer::crashed()});
  rig.judge->script(JobRole::gpuinfo, {answer::not_run(), answer::not_run(), answer::not_run()});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(r.status, Verdict::worker_crash);
  EXPECT_FALSE(r.host_fault()) << r.error;
  EXPECT_EQ(rig.jobs(JobRole::measure), 1u);
  EXPECT_EQ(r.evidence.value("gpu_health_after", ""), "ok") << r.evidence.dump();
  EXPECT_EQ(count(r.evidence, "gpu_failures"), 0u) << r.evidence.dump();
  // The GPU is still in the pool: the next evaluation gets it.
  Report next = rig.report(rig.submit("kernel|e|2"), 10s);
  EXPECT_EQ(next.status, Verdict::ok) << next.error;
}

// An evaluator that stops while a health check runs (the check is killed with
// every other job, and so is every later one) raises no alarm: the check
// decides nothing, no pause follows, the GPU stays, the evaluation ends
// interrupted.
TEST(GpuHostOnCpu, AStoppingEvaluatorRaisesNoAlarm) {
  Rig rig(1, false, /*kill_after_stop=*/true);
  rig.judge->script(JobRole::measure, {answer::crashed()});
  FakeAnswer blocked = answer::healthy();
  blocked.block_until_stop = true;
  rig.judge->script(JobRole::gpuinfo, {blocked});
  auto f = rig.submit();
  ASSERT_TRUE(rig.judge->wait_blocked(20s));
  rig.evaluator->shutdown();
  Report r = rig.report(std::move(f), 5s);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(rig.jobs(JobRole::gpuinfo), 1u);
  EXPECT_TRUE(rig.clock->pauses().empty());
  EXPECT_EQ(r.evidence.value("gpu_health_after", ""), "ok") << r.evidence.dump();
  EXPECT_EQ(count(r.evidence, "gpu_failures"), 0u) << r.evidence.dump();
}

// A stage that decides the verdict while the GPU is held (compile under the
// lease, KORCH_EVAL_COMPILE_UNDER_LEASE=1: a load_inline the rules could not
// resolve is compile_error) gives the lease back: the next evaluation gets
// the only GPU.
TEST(GpuHostOnCpu, ALeaseIsReleasedWhenAStageDecidesTheVerdict) {
  Rig rig(1, /*compile_under_lease=*/true);
  rig.judge->script(JobRole::rules, {answer::rules_unresolved_load_inline()});
  Report r = rig.report(rig.submit());
  EXPECT_EQ(r.status, Verdict::compile_error) << r.error;
  EXPECT_EQ(r.evidence.value("gpu", -1), 0) << r.evidence.dump();
  EXPECT_TRUE(r.evidence["stages"].contains("lease_s")) << r.evidence.dump();
  EXPECT_EQ(rig.jobs(JobRole::measure), 0u);
  Report next = rig.report(rig.submit("kernel|e|2"), 10s);
  EXPECT_EQ(next.status, Verdict::ok) << next.error;
}

// The GPU's facts reach the prompt: the fake H100's name, SMs and datasheet
// bandwidth (the roofline table knows it).
TEST(GpuHostOnCpu, TheDeviceDescriptionComesFromTheGpusFacts) {
  Rig rig(1);
  const std::string d = rig.evaluator->device_description();
  EXPECT_NE(d.find("NVIDIA H100 80GB HBM3"), std::string::npos) << d;
  EXPECT_NE(d.find("132 SMs"), std::string::npos) << d;
  EXPECT_EQ(rig.evaluator->mode(), config::EvalMode::gpu);
}

}  // namespace
}  // namespace korch::testing
