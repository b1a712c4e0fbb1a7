// GpuPool: leases, SUBMIT-first order, health failures and returns — with
// fake GPUs (plain indices) and a fake health check, so the scheduling is
// tested on a machine without a GPU. The H200 runs (scripts/gpu/suite.sh
// pool) exercise the same code with real devices.
#include "config/gpus.hpp"
#include "evaluator/gpu_pool.hpp"
#include "tests/support/temp_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
using korch::config::parse_gpu_list;
using korch::evaluator::GpuPool;

namespace {

GpuPool::Options fast_retry() {
  GpuPool::Options o;
  o.retry_initial = 20ms;
  o.retry_max = 80ms;
  return o;
}

// Waits (bounded) until `pred` holds.
template <class F>
bool eventually(F pred, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

}  // namespace

TEST(GpuPool, OneEvaluationPerGpuAndWaitersBlock) {
  GpuPool pool({0, 1}, [](int) { return true; });
  auto a = pool.acquire(GpuPool::Priority::check);
  auto b = pool.acquire(GpuPool::Priority::check);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->gpu(), b->gpu());
  auto third =
      std::async(std::launch::async, [&] { return pool.acquire(GpuPool::Priority::check); });
  EXPECT_EQ(third.wait_for(100ms), std::future_status::timeout);
  const int freed = b->gpu();
  b->release();
  auto c = third.get();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->gpu(), freed);
}

TEST(GpuPool, SubmitIsServedBeforeCheckThenArrivalOrder) {
  GpuPool pool({0}, [](int) { return true; });
  auto held = pool.acquire(GpuPool::Priority::check);
  std::mutex mu;
  std::vector<std::string> served;
  auto waiter = [&](GpuPool::Priority p, std::string name) {
    return std::async(std::launch::async, [&, p, name] {
      auto l = pool.acquire(p);
      std::lock_guard lk(mu);
      served.push_back(name);
    });
  };
  auto c1 = waiter(GpuPool::Priority::check, "check1");
  ASSERT_TRUE(eventually([&] { return pool.waiting() == 1; }));
  auto c2 = waiter(GpuPool::Priority::check, "check2");
  ASSERT_TRUE(eventually([&] { return pool.waiting() == 2; }));
  auto s1 = waiter(GpuPool::Priority::submit, "submit1");
  ASSERT_TRUE(eventually([&] { return pool.waiting() == 3; }));
  held->release();
  c1.get();
  c2.get();
  s1.get();
  EXPECT_EQ(served, (std::vector<std::string>{"submit1", "check1", "check2"}));
}

TEST(GpuPool, FailedHealthCheckTakesTheGpuOutUntilARetryPasses) {
  std::atomic<bool> gpu0_healthy{false};
  std::atomic<int> checks0{0};
  GpuPool pool(
      {0, 1},
      [&](int g) {
        if (g != 0) return true;
        checks0++;
        return gpu0_healthy.load();
      },
      fast_retry());
  auto a = pool.acquire(GpuPool::Priority::submit);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->gpu(), 0);  // the configured order: the first free one
  EXPECT_FALSE(a->check_health());
  EXPECT_FALSE(*a);  // the lease is gone with the GPU
  auto st = pool.stats();
  EXPECT_FALSE(st[0].in_pool);
  EXPECT_EQ(st[0].health_failures, 1);
  // While GPU 0 is out, every lease is GPU 1.
  for (int i = 0; i < 3; ++i) {
    auto l = pool.acquire(GpuPool::Priority::check);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->gpu(), 1);
  }
  // Retries keep failing (back-off), then one passes and GPU 0 returns.
  ASSERT_TRUE(eventually([&] { return checks0.load() >= 3; }));
  EXPECT_FALSE(pool.stats()[0].in_pool);
  gpu0_healthy = true;
  ASSERT_TRUE(eventually([&] { return pool.stats()[0].in_pool; }));
  EXPECT_EQ(pool.stats()[0].returns, 1);
  auto x = pool.acquire(GpuPool::Priority::check);
  auto y = pool.acquire(GpuPool::Priority::check);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(std::set<int>({x->gpu(), y->gpu()}), std::set<int>({0, 1}));
}

TEST(GpuPool, StopWakesWaiters) {
  GpuPool pool({0}, [](int) { return true; });
  auto held = pool.acquire(GpuPool::Priority::check);
  auto w = std::async(std::launch::async, [&] { return pool.acquire(GpuPool::Priority::submit); });
  ASSERT_TRUE(eventually([&] { return pool.waiting() == 1; }));
  pool.stop();
  EXPECT_FALSE(w.get().has_value());
}

TEST(GpuPool, BusyTimeCountsLeasedTime) {
  GpuPool pool({3}, [](int) { return true; });
  {
    auto l = pool.acquire(GpuPool::Priority::check);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->gpu(), 3);
    std::this_thread::sleep_for(120ms);
  }
  auto st = pool.stats();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_GE(st[0].busy_s, 0.11);
  EXPECT_LT(st[0].busy_s, 5.0);
  EXPECT_EQ(st[0].leases, 1);
}

// A campaign-shaped load: many evaluations on two fake GPUs, one of which
// fails its health check once. Every evaluation completes exactly once, and
// no GPU ever runs two at the same time.
TEST(GpuPool, EveryEvaluationRunsExactlyOnceWhileAGpuFailsAndReturns) {
  std::atomic<int> fail_next_on_0{1};
  GpuPool pool(
      {0, 1},
      [&](int g) {
        if (g == 0 && fail_next_on_0.load() > 0) {
          fail_next_on_0--;
          return false;
        }
        return true;
      },
      fast_retry());
  std::atomic<int> busy[2] = {0, 0};
  std::atomic<bool> overlap{false};
  std::mutex mu;
  std::vector<int> done_count(60, 0);
  std::vector<int> per_gpu(2, 0);
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int id; (id = next.fetch_add(1)) < 60;) {
      for (int attempt = 0;; ++attempt) {
        auto l = pool.acquire(id % 3 ? GpuPool::Priority::check : GpuPool::Priority::submit);
        ASSERT_TRUE(l);
        const int g = l->gpu();
        if (busy[g].fetch_add(1) != 0) overlap = true;
        std::this_thread::sleep_for(1ms);
        busy[g].fetch_sub(1);
        // Evaluation 7 "crashes": its GPU is checked; a failed check means
        // the run does not count and it runs again elsewhere.
        if (id == 7 && attempt == 0 && !l->check_health()) continue;
        std::lock_guard lk(mu);
        done_count[id]++;
        per_gpu[g]++;
        break;
      }
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; ++i) ts.emplace_back(worker);
  for (auto& t : ts) t.join();
  EXPECT_FALSE(overlap.load());
  for (int id = 0; id < 60; ++id) EXPECT_EQ(done_count[id], 1) << "evaluation " << id;
  EXPECT_GT(per_gpu[1], 0);
  ASSERT_TRUE(eventually([&] { return pool.stats()[0].in_pool; }));
}

// One GPU, one measurement, host-wide: two pools (two korch processes'
// evaluators) with the same lock folder never lease the same GPU at once.
TEST(GpuPoolHost, TwoPoolsShareEachGpu) {
  korch::testing::TempDir dir;
  GpuPool::Options o;
  o.host_lock_dir = (dir.path() / "locks").string();
  GpuPool a(
      {0}, [](int) { return true; }, o);
  GpuPool b(
      {0}, [](int) { return true; }, o);
  auto la = a.acquire(GpuPool::Priority::submit);
  ASSERT_TRUE(la);
  auto lb = std::async(std::launch::async, [&] { return b.acquire(GpuPool::Priority::submit); });
  EXPECT_EQ(lb.wait_for(300ms), std::future_status::timeout);  // held by the other pool
  std::this_thread::sleep_for(50ms);
  la->release();
  auto got = lb.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->gpu(), 0);
  EXPECT_GT(got->host_wait_s(), 0.2);
  EXPECT_GT(b.stats()[0].host_wait_s, 0.2);
}

// A GPU another process holds is skipped while one is free here.
TEST(GpuPoolHost, PrefersAGpuNoOtherProcessHolds) {
  korch::testing::TempDir dir;
  GpuPool::Options o;
  o.host_lock_dir = (dir.path() / "locks").string();
  GpuPool a(
      {0, 1}, [](int) { return true; }, o);
  GpuPool b(
      {0, 1}, [](int) { return true; }, o);
  auto la = a.acquire(GpuPool::Priority::check);
  ASSERT_TRUE(la);
  auto lb = b.acquire(GpuPool::Priority::check);
  ASSERT_TRUE(lb);
  EXPECT_NE(la->gpu(), lb->gpu());
  EXPECT_EQ(lb->host_wait_s(), 0);
}

// A real second process holds GPU 0's lock and is killed with SIGKILL: the
// kernel drops its lock and the waiting lease goes ahead.
TEST(GpuPoolHost, AKilledHolderReleasesTheGpu) {
  korch::testing::TempDir dir;
  GpuPool::Options o;
  o.host_lock_dir = (dir.path() / "locks").string();
  ::mkdir(o.host_lock_dir.c_str(), 01777);
  const std::string path = GpuPool::host_lock_path(o.host_lock_dir, 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) _exit(1);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  GpuPool pool(
      {0}, [](int) { return true; }, o);
  auto lease =
      std::async(std::launch::async, [&] { return pool.acquire(GpuPool::Priority::submit); });
  EXPECT_EQ(lease.wait_for(300ms), std::future_status::timeout);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  auto got = lease.get();
  ASSERT_TRUE(got);
  EXPECT_GT(got->host_wait_s(), 0.2);
  ::close(ready[0]);
  ::close(ready[1]);
}

// stop() is not kept waiting by another process's measurement.
TEST(GpuPoolHost, StopWakesAWaiterHeldOffByAnotherProcess) {
  korch::testing::TempDir dir;
  GpuPool::Options o;
  o.host_lock_dir = (dir.path() / "locks").string();
  GpuPool other(
      {0}, [](int) { return true; }, o);
  auto held = other.acquire(GpuPool::Priority::submit);
  ASSERT_TRUE(held);
  GpuPool pool(
      {0}, [](int) { return true; }, o);
  auto waiter =
      std::async(std::launch::async, [&] { return pool.acquire(GpuPool::Priority::submit); });
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
  pool.stop();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(waiter.get().has_value());
}

TEST(GpuPoolHost, LockFileNamesTheHostGpu) {
  ::setenv("CUDA_VISIBLE_DEVICES", "3,GPU-abc", 1);
  EXPECT_EQ(GpuPool::host_lock_path("/d", 0), "/d/gpu-3.lock");
  EXPECT_EQ(GpuPool::host_lock_path("/d", 1), "/d/gpu-GPU-abc.lock");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(GpuPool::host_lock_path("/d", 1), "/d/gpu-1.lock");
}

TEST(GpuList, ParsesAllListsAndRanges) {
  auto ok = [](const std::string& spec, std::optional<int> n) {
    auto r = parse_gpu_list(spec, n);
    return r ? *r : std::vector<int>{-1};
  };
  EXPECT_EQ(ok("all", 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(ok("", 1), (std::vector<int>{0}));
  EXPECT_EQ(ok("1, 0", 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(ok("0-3,5", 8), (std::vector<int>{0, 1, 2, 3, 5}));
  EXPECT_EQ(ok("0,0", 2), (std::vector<int>{0}));
  EXPECT_EQ(ok("7", std::nullopt), (std::vector<int>{7}));  // syntax only
  auto bad = parse_gpu_list("2", 2);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("GPU 2 does not exist"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(parse_gpu_list("a", 2));
  EXPECT_FALSE(parse_gpu_list("3-1", 4));
  EXPECT_FALSE(parse_gpu_list("all", 0));
  EXPECT_FALSE(parse_gpu_list("0;1", std::nullopt));
}

// --- cores for measure jobs and for compiles (GpuPool::plan_cores) ---

namespace {
std::vector<int> iota_cpus(int n, int first = 0) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return v;
}
}  // namespace

TEST(CorePlan, OneGpuOnSixteenCoresGetsEightForItsMeasureJobs) {
  // The H200 machine: one GPU, 16 cores. Its measure job (a judge and up to
  // eight runners) gets 8 cores, the compiles the other 8.
  const auto plan = GpuPool::plan_cores(iota_cpus(16), 1);
  EXPECT_EQ(plan.per_gpu, 8);
  EXPECT_EQ(plan.per_gpu_cores.at(0), iota_cpus(8));
  EXPECT_EQ(plan.rest, iota_cpus(8, 8));
}

TEST(CorePlan, EveryHostGpuHasItsOwnCoresAndNoneOverlap) {
  // 8 GPUs on 128 cores: 8 each, 64 left for compiles; 2 GPUs on 20 cores: 5 each.
  for (auto [cores, gpus, per] :
       {std::tuple{128, 8, 8}, std::tuple{20, 2, 5}, std::tuple{32, 2, 8}}) {
    const auto usable = iota_cpus(cores, 4);  // an affinity mask that starts at core 4
    const auto plan = GpuPool::plan_cores(usable, gpus);
    EXPECT_EQ(plan.per_gpu, per) << cores << " cores, " << gpus << " GPUs";
    std::set<int> seen;
    for (int g = 0; g < gpus; ++g) {
      ASSERT_EQ(plan.per_gpu_cores.at(g).size(), static_cast<std::size_t>(per));
      for (int c : plan.per_gpu_cores.at(g)) EXPECT_TRUE(seen.insert(c).second) << "core " << c;
    }
    for (int c : plan.rest) EXPECT_TRUE(seen.insert(c).second) << "core " << c;
    EXPECT_EQ(seen.size(), usable.size());  // every usable core, once
    EXPECT_EQ(plan.rest.size(), static_cast<std::size_t>(cores - gpus * per));
  }
}

TEST(CorePlan, TooFewCoresReserveNothing) {
  // 2 per GPU plus 2 for compiles is the least that reserves; below it
  // every job may run on every core, as a 2-core CI machine does.
  const auto small = GpuPool::plan_cores(iota_cpus(5), 2);
  EXPECT_EQ(small.per_gpu, 0);
  EXPECT_TRUE(small.per_gpu_cores.empty());
  EXPECT_EQ(small.rest, iota_cpus(5));
  const auto just = GpuPool::plan_cores(iota_cpus(6), 2);
  EXPECT_EQ(just.per_gpu, 2);
  EXPECT_EQ(just.rest, iota_cpus(2, 4));
}
