#include "tools/korch/cli.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace korch::cli {

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = flags.find(name);
  if (it == flags.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto [b, e] = flags.equal_range(name);
  for (auto it = b; it != e; ++it) out.push_back(it->second);
  return out;
}

int report_failure(std::string_view verb, const Error& error, std::string_view context) {
  const std::string line =
      "korch " + std::string(verb) + ": " + std::string(context) + error.message + "\n";
  std::fputs(line.c_str(), stderr);
  return exit_code(error.kind);
}

int report_failure(std::string_view verb, ErrorKind kind, std::string message) {
  return report_failure(verb, Error{std::move(message), kind});
}

template <class T>
Result<std::optional<T>> get_number(const Args& args, const std::string& name) {
  auto text = args.get(name);
  if (!text) return std::optional<T>();
  T value{};
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  bool ok = ec == std::errc() && ptr == end;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value) && value >= 0;
  if (!ok) {
    return fail(ErrorKind::invalid,
                name + " takes " +
                    (std::is_floating_point_v<T> ? "a number >= 0" : "a whole number") + ", not '" +
                    *text + "'");
  }
  return std::optional<T>(value);
}

template Result<std::optional<double>> get_number(const Args&, const std::string&);
template Result<std::optional<std::int64_t>> get_number(const Args&, const std::string&);
template Result<std::optional<std::uint64_t>> get_number(const Args&, const std::string&);

}  // namespace korch::cli
