#pragma once
// The GPUs an evaluator measures on (evaluator.gpus), handed out as leases:
// one evaluation holds one GPU at a time, from its Triton warm-up to the end
// of its measurement; compiles never hold one (they run on the CPU pool while
// the GPUs measure). Waiting evaluations are served SUBMIT before CHECK, then
// in arrival order.
//
// A GPU whose health check fails leaves the pool; a background thread checks
// it again after a back-off (retry_initial, doubling to retry_max) and returns
// it when a check passes. The pool itself never loses an evaluation: a caller
// whose GPU failed gets `false` from check_health() and asks for another lease.
//
// Pure scheduling: no processes, no CUDA, so the logic is tested on the CPU
// with fake GPUs and a fake health check (tests/evaluator/test_gpu_pool.cpp).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace korch::evaluator {

class GpuPool {
 public:
  enum class Priority { submit = 0, check = 1 };  // lower is served first
  using HealthCheck = std::function<bool(int gpu)>;
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::milliseconds retry_initial{std::chrono::seconds(30)};
    std::chrono::milliseconds retry_max{std::chrono::minutes(10)};
  };

  // `gpus`: device indices (as CUDA numbers them on this host), at least one.
  GpuPool(std::vector<int> gpus, HealthCheck check, Options opt);
  GpuPool(std::vector<int> gpus, HealthCheck check)
      : GpuPool(std::move(gpus), std::move(check), Options{}) {}
  ~GpuPool();
  GpuPool(const GpuPool&) = delete;
  GpuPool& operator=(const GpuPool&) = delete;

  // One GPU, held until destroyed (or release()d).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    ~Lease() { release(); }
    int gpu() const { return m_gpu; }
    explicit operator bool() const { return m_pool != nullptr; }
    // Runs the health check on this GPU (the lease is still held, so nothing
    // else runs there meanwhile). false: the GPU failed, left the pool and the
    // lease is gone; the evaluation that was running on it should run again.
    bool check_health();
    void release();

   private:
    friend class GpuPool;
    Lease(GpuPool* p, int gpu) : m_pool(p), m_gpu(gpu) {}
    GpuPool* m_pool = nullptr;
    int m_gpu = -1;
  };

  // Blocks until a GPU is free and every earlier waiter of the same or a
  // higher priority has been served. nullopt once stop() was called.
  std::optional<Lease> acquire(Priority p);

  // Wakes every waiter (they get nullopt) and ends the retry thread. Leases
  // still held stay valid until released.
  void stop();

  struct GpuStats {
    int gpu = -1;
    bool in_pool = true;  // false: failed its last health check
    double busy_s = 0;    // total time leased out
    int leases = 0;
    int health_failures = 0;
    int returns = 0;  // times it came back after a failure
  };
  std::vector<GpuStats> stats() const;
  std::size_t size() const { return m_order.size(); }
  int waiting() const;

 private:
  struct Gpu {
    GpuStats stats;
    bool leased = false;
    Clock::time_point leased_at{};
    Clock::time_point retry_at{};
    std::chrono::milliseconds backoff{0};
  };
  void give_back(int gpu, bool healthy);
  void retry_loop();

  HealthCheck m_check;
  Options m_opt;
  std::vector<int> m_order;  // the configured order: the first free one is leased
  mutable std::mutex m_mu;
  std::condition_variable m_cv;        // a GPU came free, or stop
  std::condition_variable m_retry_cv;  // a GPU left the pool, or stop
  std::map<int, Gpu> m_gpus;
  std::uint64_t m_next_ticket = 0;
  std::map<std::pair<int, std::uint64_t>, bool> m_waiters;  // (priority, ticket) -> present
  bool m_stopping = false;
  std::thread m_retry;
};

}  // namespace korch::evaluator
