#include "evaluator/gpu_pool.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace korch::evaluator {

std::string GpuPool::host_lock_path(const std::string& dir, int gpu) {
  std::string id = std::to_string(gpu);
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd && *cvd) {
    std::stringstream ss(cvd);
    std::string item;
    for (int i = 0; std::getline(ss, item, ','); ++i) {
      if (i == gpu) {
        id = item;  // a host index or a GPU UUID
        break;
      }
    }
  }
  for (char& c : id)
    if (c == '/' || c == ' ') c = '_';
  return dir + "/gpu-" + id + ".lock";
}

GpuPool::CorePlan GpuPool::plan_cores(const std::vector<int>& usable, int host_gpus) {
  CorePlan plan;
  plan.rest = usable;
  const auto n = static_cast<int>(usable.size());
  if (host_gpus < 1 || n < 2 * host_gpus + 2) return plan;
  plan.per_gpu = std::clamp(n / host_gpus / 2, 2, 8);
  for (int g = 0; g < host_gpus; ++g)
    plan.per_gpu_cores[g].assign(usable.begin() + g * plan.per_gpu,
                                 usable.begin() + (g + 1) * plan.per_gpu);
  plan.rest.assign(usable.begin() + host_gpus * plan.per_gpu, usable.end());
  return plan;
}

namespace {
constexpr auto k_host_poll = std::chrono::milliseconds(20);
}  // namespace

int GpuPool::lock_host(int gpu) const {
  if (m_opt.host_lock_dir.empty()) return -1;
  // The file is readable by all (flock needs no write access).
  int fd = ::open(lock_path(gpu).c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int rc;
  while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {}
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Polls rather than blocking in flock(2), so stop() is never kept waiting by
// another process's measurement. -1 when stopped (or no lock dir is set).
int GpuPool::wait_host(int gpu) {
  if (m_opt.host_lock_dir.empty()) return -1;
  for (;;) {
    if (int fd = lock_host(gpu); fd >= 0) return fd;
    std::unique_lock lk(m_mu);
    if (m_cv.wait_for(lk, k_host_poll, [&] { return m_stopping; })) return -1;
  }
}

GpuPool::GpuPool(std::vector<int> gpus, HealthCheck check, Options opt)
    : m_check(std::move(check)), m_opt(opt), m_order(std::move(gpus)) {
  for (int g : m_order) m_gpus[g].stats.gpu = g;
  // Shared by every user's korch: the lock folder is world-writable and sticky.
  if (!m_opt.host_lock_dir.empty() && ::mkdir(m_opt.host_lock_dir.c_str(), 01777) == 0)
    (void)::chmod(m_opt.host_lock_dir.c_str(), 01777);
  m_retry = std::thread([this] { retry_loop(); });
}

GpuPool::~GpuPool() {
  stop();
  if (m_retry.joinable()) m_retry.join();
}

void GpuPool::stop() {
  {
    std::lock_guard lk(m_mu);
    m_stopping = true;
  }
  m_cv.notify_all();
  m_retry_cv.notify_all();
}

std::optional<GpuPool::Lease> GpuPool::acquire(Priority p) {
  std::unique_lock lk(m_mu);
  const auto key = std::make_pair(static_cast<int>(p), m_next_ticket++);
  m_waiters[key] = true;
  int got = -1;
  int fd = -1;
  m_cv.wait(lk, [&] {
    if (m_stopping) return true;
    if (m_waiters.begin()->first != key) return false;  // someone ahead of us
    int first_free = -1;
    for (int g : m_order) {
      Gpu& s = m_gpus[g];
      if (s.leased || !s.stats.in_pool) continue;
      if (first_free < 0) first_free = g;
      if (m_opt.host_lock_dir.empty()) {
        got = g;
        return true;
      }
      // Host-wide: a GPU no other process holds, when there is one.
      if ((fd = lock_host(g)) >= 0) {
        got = g;
        return true;
      }
    }
    got = first_free;  // every free one is held elsewhere: wait for the first
    return got >= 0;
  });
  m_waiters.erase(key);
  if (m_stopping) {
    if (fd >= 0) ::close(fd);
    m_cv.notify_all();
    return std::nullopt;
  }
  Gpu& s = m_gpus[got];
  s.leased = true;
  s.leased_at = Clock::now();
  s.stats.leases++;
  // The next waiter may find another free GPU.
  m_cv.notify_all();
  double waited = 0;
  if (fd < 0 && !m_opt.host_lock_dir.empty()) {
    lk.unlock();
    const auto w0 = Clock::now();
    fd = wait_host(got);
    waited = std::chrono::duration<double>(Clock::now() - w0).count();
    lk.lock();
    s.leased_at = Clock::now();
    s.stats.host_wait_s += waited;
    if (fd < 0) {  // stopped while another process held the GPU
      s.leased = false;
      m_cv.notify_all();
      return std::nullopt;
    }
  }
  return Lease(this, got, fd, waited);
}

void GpuPool::give_back(int gpu, bool healthy) {
  {
    std::lock_guard lk(m_mu);
    Gpu& s = m_gpus[gpu];
    if (s.leased)
      s.stats.busy_s += std::chrono::duration<double>(Clock::now() - s.leased_at).count();
    s.leased = false;
    if (!healthy) {
      s.stats.in_pool = false;
      s.stats.health_failures++;
      s.backoff =
          s.backoff.count() == 0 ? m_opt.retry_initial : std::min(m_opt.retry_max, s.backoff * 2);
      s.retry_at = Clock::now() + s.backoff;
    }
  }
  if (healthy)
    m_cv.notify_all();
  else
    m_retry_cv.notify_all();
}

// Checks every GPU out of the pool when its back-off ends. The check runs
// with the GPU marked leased, so no evaluation is handed that GPU meanwhile.
void GpuPool::retry_loop() {
  std::unique_lock lk(m_mu);
  while (!m_stopping) {
    auto next = Clock::time_point::max();
    int due = -1;
    for (auto& [g, s] : m_gpus) {
      if (s.stats.in_pool || s.leased) continue;
      if (s.retry_at <= Clock::now()) {
        due = g;
        break;
      }
      next = std::min(next, s.retry_at);
    }
    if (due < 0) {
      if (next == Clock::time_point::max())
        m_retry_cv.wait(lk);
      else
        m_retry_cv.wait_until(lk, next);
      continue;
    }
    Gpu& s = m_gpus[due];
    s.leased = true;
    lk.unlock();
    bool ok = false;
    const int fd = wait_host(due);                 // the check runs on the GPU too
    if (fd < 0 && !m_opt.host_lock_dir.empty()) {  // stopped meanwhile
      lk.lock();
      s.leased = false;
      continue;
    }
    try {
      ok = m_check(due);
    } catch (...) {
      ok = false;
    }
    if (fd >= 0) ::close(fd);
    lk.lock();
    s.leased = false;
    if (ok) {
      s.stats.in_pool = true;
      s.stats.returns++;
      s.backoff = std::chrono::milliseconds(0);
      m_cv.notify_all();
    } else {
      s.backoff = std::min(m_opt.retry_max, s.backoff * 2);
      s.retry_at = Clock::now() + s.backoff;
    }
  }
}

std::vector<GpuPool::GpuStats> GpuPool::stats() const {
  std::lock_guard lk(m_mu);
  std::vector<GpuStats> v;
  for (int g : m_order) {
    GpuStats s = m_gpus.at(g).stats;
    const Gpu& gpu = m_gpus.at(g);
    if (gpu.leased && gpu.stats.in_pool)
      s.busy_s += std::chrono::duration<double>(Clock::now() - gpu.leased_at).count();
    v.push_back(s);
  }
  return v;
}

int GpuPool::waiting() const {
  std::lock_guard lk(m_mu);
  return static_cast<int>(m_waiters.size());
}

GpuPool::Lease& GpuPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    release();
    m_pool = o.m_pool;
    m_gpu = o.m_gpu;
    m_host_fd = o.m_host_fd;
    m_host_wait_s = o.m_host_wait_s;
    o.m_pool = nullptr;
    o.m_host_fd = -1;
  }
  return *this;
}

void GpuPool::Lease::close_host_lock() {
  if (m_host_fd >= 0) ::close(m_host_fd);
  m_host_fd = -1;
}

void GpuPool::Lease::release() {
  if (!m_pool) return;
  GpuPool* p = m_pool;
  m_pool = nullptr;
  close_host_lock();  // before the pool hands the GPU to a waiter
  p->give_back(m_gpu, true);
}

bool GpuPool::Lease::check_health() {
  if (!m_pool) return false;
  bool ok = false;
  try {
    ok = m_pool->m_check(m_gpu);
  } catch (...) {
    ok = false;
  }
  if (ok) return true;
  GpuPool* p = m_pool;
  m_pool = nullptr;
  close_host_lock();
  p->give_back(m_gpu, false);
  return false;
}

}  // namespace korch::evaluator
