#include "llm_clients/adaptive_limit.hpp"

#include <algorithm>
#include <cmath>

namespace korch::llm {

AdaptiveLimit::AdaptiveLimit(int max_limit, double cooldown_s, double decrease_factor)
    : m_max(std::max(1, max_limit)),
      m_cooldown_s(std::max(0.0, cooldown_s)),
      m_factor(std::clamp(decrease_factor, 0.05, 0.95)),
      m_limit(m_max) {}

bool AdaptiveLimit::on_rate_limited(double now_s) {
  if (now_s - m_last_decrease_s < m_cooldown_s) return false;
  m_last_decrease_s = now_s;
  const int next = std::max(1, static_cast<int>(std::floor(m_limit * m_factor)));
  m_successes = 0;
  if (next == m_limit) return false;
  m_limit = next;
  return true;
}

bool AdaptiveLimit::on_success() {
  if (m_limit >= m_max) return false;
  if (++m_successes < m_limit) return false;
  m_successes = 0;
  ++m_limit;
  return true;
}

}  // namespace korch::llm
