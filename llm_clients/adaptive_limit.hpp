#pragma once
// Adaptive concurrency limit of one endpoint (AIMD). A 429 halves the limit
// at most once per cooldown window; the limit grows by one per "limit"
// successes (additive increase), up to the configured maximum. 5xx
// and timeouts leave it alone. Time is passed in, so the class is pure and
// testable. Not thread-safe: the client touches it only on its event loop.
#include <string>

namespace korch::llm {

class AdaptiveLimit {
 public:
  // `max_limit` >= 1 is the configured concurrency and the starting limit.
  AdaptiveLimit(int max_limit, double cooldown_s, double decrease_factor = 0.5);

  int limit() const { return m_limit; }
  int max_limit() const { return m_max; }

  // A 429 at time `now_s`. Returns true when the limit changed.
  bool on_rate_limited(double now_s);
  // A successful call. Returns true when the (integer) limit changed.
  bool on_success();

 private:
  int m_max;
  double m_cooldown_s;
  double m_factor;
  int m_limit;
  int m_successes = 0;  // successes since the last change
  double m_last_decrease_s = -1e300;
};

}  // namespace korch::llm
