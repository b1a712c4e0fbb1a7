#include "config/vocabulary.hpp"

#include <fmt/format.h>

namespace korch::config {

std::string format_tolerance(double x) {
  // "{:.0e}" writes 1e-04; drop the exponent's leading zeros.
  auto s = fmt::format("{:.0e}", x);
  auto e = s.find('e');
  if (e == std::string::npos || e + 2 >= s.size()) return s;
  std::size_t digits = e + 2;  // after the sign
  while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  return s;
}

std::string tolerance_summary(Tolerance t) {
  const auto p = tolerance_profile(t);
  const auto tol = p.atol == p.rtol ? "atol = rtol = " + format_tolerance(p.atol)
                                    : fmt::format("atol = {}, rtol = {}", format_tolerance(p.atol),
                                                  format_tolerance(p.rtol));
  if (p.allow_tf32) return tol + " (TF32 allowed)";
  return fmt::format("{} (fp32; TF32 off; fp16/bf16 tasks {})", tol,
                     format_tolerance(p.low_precision_tol));
}

}  // namespace korch::config
