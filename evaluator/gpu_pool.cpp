#include "evaluator/gpu_pool.hpp"

#include <algorithm>

namespace korch::evaluator {

GpuPool::GpuPool(std::vector<int> gpus, HealthCheck check, Options opt)
    : m_check(std::move(check)), m_opt(opt), m_order(std::move(gpus)) {
  for (int g : m_order) m_gpus[g].stats.gpu = g;
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
  m_cv.wait(lk, [&] {
    if (m_stopping) return true;
    if (m_waiters.begin()->first != key) return false;  // someone ahead of us
    for (int g : m_order) {
      Gpu& s = m_gpus[g];
      if (!s.leased && s.stats.in_pool) {
        got = g;
        return true;
      }
    }
    return false;
  });
  m_waiters.erase(key);
  if (m_stopping) {
    m_cv.notify_all();
    return std::nullopt;
  }
  Gpu& s = m_gpus[got];
  s.leased = true;
  s.leased_at = Clock::now();
  s.stats.leases++;
  // The next waiter may find another free GPU.
  m_cv.notify_all();
  return Lease(this, got);
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
    try {
      ok = m_check(due);
    } catch (...) {
      ok = false;
    }
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
    o.m_pool = nullptr;
  }
  return *this;
}

void GpuPool::Lease::release() {
  if (!m_pool) return;
  GpuPool* p = m_pool;
  m_pool = nullptr;
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
  p->give_back(m_gpu, false);
  return false;
}

}  // namespace korch::evaluator
