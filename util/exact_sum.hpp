#pragma once
// A sum of doubles that does not depend on the order they are added in:
// Shewchuk's exact partials, rounded once at the end (the algorithm of
// Python's math.fsum), so the same numbers added in any order give the same
// double. The report's strategy curves add the same episodes' costs in
// different orders (reports/report.cpp).
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace korch {

class ExactSum {
 public:
  void add(double x) {
    std::size_t i = 0;
    for (std::size_t j = 0; j < m_partials.size(); ++j) {
      double y = m_partials[j];
      if (std::abs(x) < std::abs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0.0) m_partials[i++] = lo;
      x = hi;
    }
    m_partials.resize(i);
    m_partials.push_back(x);
  }
  // The sum, correctly rounded (round half to even).
  double value() const {
    std::size_t n = m_partials.size();
    if (n == 0) return 0.0;
    double hi = m_partials[--n];
    double lo = 0.0;
    while (n > 0) {
      const double x = hi;
      const double y = m_partials[--n];
      hi = x + y;
      lo = y - (hi - x);
      if (lo != 0.0) break;
    }
    if (n > 0 && ((lo < 0.0 && m_partials[n - 1] < 0.0) || (lo > 0.0 && m_partials[n - 1] > 0.0))) {
      const double y = lo * 2.0;
      const double x = hi + y;
      if (y == x - hi) hi = x;
    }
    return hi;
  }

 private:
  std::vector<double> m_partials;  // non-overlapping, increasing magnitude
};

}  // namespace korch
