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

}  // namespace korch::log
