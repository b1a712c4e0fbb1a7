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
// Host-wide (Options::host_lock_dir): a lease also holds an exclusive flock(2)
// on <host_lock_dir>/gpu-<id>.lock, so every korch process on the host
// (eval, run, serve, tasks validate, benchmarks) measures on a GPU only while
// no other one does. A free GPU whose lock another process holds is skipped
// while another is free; when none is, the lease waits for that lock
// (Lease::host_wait_s). The kernel drops a lock when its holder dies.
//
// No processes, no CUDA, so the logic is tested on the CPU with fake GPUs and
// a fake health check (tests/evaluator/test_gpu_pool.cpp).
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
    // Empty: leases are exclusive within this pool only.
    std::string host_lock_dir;
  };

  // The lock file of `gpu` under `dir`, named by the GPU as the host numbers
  // it: CUDA_VISIBLE_DEVICES of this process, when set, maps the index.
  static std::string host_lock_path(const std::string& dir, int gpu);

  // Which cores a GPU's measure jobs run on, and which the compiles and
  // rules get: GPU g of the host takes `per_gpu` consecutive usable cores
  // starting at g * per_gpu, for every GPU of the host (not only this
  // process's), so two korch processes given different GPUs never share
  // cores. per_gpu is half the host's cores per GPU, between 2 and 8: a
  // measure job runs a judge and up to eight runners whose set-up and
  // first calls go in parallel (on the H200, 16 cores and one GPU, two
  // cores held those nine processes' first Triton calls to 2.0 s where one
  // runner alone took 0.6 s; stop 34). Fewer cores than 2 per GPU plus 2:
  // no reservation (empty per_gpu_cores; everything runs everywhere).
  struct CorePlan {
    int per_gpu = 0;
    std::map<int, std::vector<int>> per_gpu_cores;  // every host GPU
    std::vector<int> rest;                          // compiles, rules
  };
  static CorePlan plan_cores(const std::vector<int>& usable, int host_gpus);
  // This pool's lock file of `gpu` ("" without a host_lock_dir).
  std::string lock_path(int gpu) const {
    return m_opt.host_lock_dir.empty() ? "" : host_lock_path(m_opt.host_lock_dir, gpu);
  }

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
    // Seconds this lease waited for another process's hold on the GPU.
    double host_wait_s() const { return m_host_wait_s; }
    explicit operator bool() const { return m_pool != nullptr; }
    // Runs the health check on this GPU (the lease is still held, so nothing
    // else runs there meanwhile). false: the GPU failed, left the pool and the
    // lease is gone; the evaluation that was running on it should run again.
    bool check_health();
    void release();

   private:
    friend class GpuPool;
    Lease(GpuPool* p, int gpu, int fd, double waited)
        : m_pool(p), m_gpu(gpu), m_host_fd(fd), m_host_wait_s(waited) {}
    void close_host_lock();
    GpuPool* m_pool = nullptr;
    int m_gpu = -1;
    int m_host_fd = -1;  // the host-wide lock, or -1
    double m_host_wait_s = 0;
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
    int returns = 0;         // times it came back after a failure
    double host_wait_s = 0;  // waited for other processes' holds
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
  // The host-wide lock of `gpu`: an fd holding it, or -1 when another
  // process holds it or no lock dir is set. Never blocks.
  int lock_host(int gpu) const;
  int wait_host(int gpu);  // lock_host, waiting until held or stop()

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
