#pragma once
// What the store benchmarks (korch-bench-store, korch-bench-sqlite-ceiling)
// share, so that their turns/s and bytes per turn compare: the payload text,
// the clock and the process's bytes written to storage.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace korch::bench {

// Printable pseudo-random bytes from a code-like alphabet (incompressible
// enough to be realistic).
inline std::string text(std::size_t bytes, std::uint64_t seed) {
  static const char k_alphabet[] = "abcdefghijklmnopqrstuvwxyz_(){}[]=+-*/ 0123456789\n\t.,:;";
  std::mt19937_64 rng(seed);
  std::string s(bytes, ' ');
  for (auto& c : s) c = k_alphabet[rng() % (sizeof(k_alphabet) - 1)];
  return s;
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes this process has caused to be written to storage (/proc/self/io
// write_bytes: WAL frames, checkpoints); -1 where the kernel does not say.
inline std::int64_t disk_write_bytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (!f) return -1;
  char line[128];
  long long v = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "write_bytes: %lld", &v) == 1) break;
  }
  std::fclose(f);
  return v;
}

}  // namespace korch::bench
