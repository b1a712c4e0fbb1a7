#include "util/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace korch::log {

namespace {
constexpr const char* k_logger_name = "korch";
constexpr const char* k_pattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v";
}  // namespace

void init(std::string_view level, std::string_view file) {
  spdlog::drop(k_logger_name);  // a second init replaces the first
  std::shared_ptr<spdlog::logger> logger;
  if (file.empty()) {
    logger = spdlog::stderr_logger_mt(k_logger_name);
  } else {
    logger = spdlog::basic_logger_mt(k_logger_name, std::string(file));
  }
  spdlog::set_default_logger(logger);
  set_level(level);
  spdlog::set_pattern(k_pattern);
}

void set_level(std::string_view level) {
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

std::string redact(std::string text, std::initializer_list<std::string_view> secrets) {
  for (auto secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t pos = text.find(secret); pos != std::string::npos;
         pos = text.find(secret, pos)) {
      text.replace(pos, secret.size(), "****");
      pos += 4;
    }
  }
  return text;
}

std::string redact_url(std::string_view text) {
  std::string out(text);
  std::size_t scheme = out.find("://");
  if (scheme == std::string::npos) return out;
  std::size_t auth = scheme + 3;
  // The authority ends at the first '/', '?' or '#'; its userinfo at the last '@'.
  std::size_t end = out.find_first_of("/?#", auth);
  if (end == std::string::npos) end = out.size();
  std::size_t at = out.rfind('@', end);
  if (at != std::string::npos && at >= auth) {
    std::size_t colon = out.find(':', auth);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "****");
  }
  std::size_t query = out.find('?');
  if (query == std::string::npos) return out;
  constexpr std::string_view k_key = "password=";
  for (std::size_t pos = out.find(k_key, query); pos != std::string::npos;
       pos = out.find(k_key, pos)) {
    char before = out[pos - 1];
    pos += k_key.size();
    if (before != '?' && before != '&') continue;
    std::size_t stop = out.find('&', pos);
    if (stop == std::string::npos) stop = out.size();
    out.replace(pos, stop - pos, "****");
    pos += 4;
  }
  return out;
}

}  // namespace korch::log
