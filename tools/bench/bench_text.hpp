#pragma once
// The text the store benchmarks write: printable pseudo-random bytes from a
// code-like alphabet (incompressible enough to be realistic), the same in
// korch-bench-store and korch-bench-sqlite-ceiling so that their bytes per
// turn compare.
#include <cstdint>
#include <random>
#include <string>

namespace korch::bench {

inline std::string text(std::size_t bytes, std::uint64_t seed) {
  static const char k_alphabet[] = "abcdefghijklmnopqrstuvwxyz_(){}[]=+-*/ 0123456789\n\t.,:;";
  std::mt19937_64 rng(seed);
  std::string s(bytes, ' ');
  for (auto& c : s) c = k_alphabet[rng() % (sizeof(k_alphabet) - 1)];
  return s;
}

}  // namespace korch::bench
