#include "util/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace korch::log {

void init(std::string_view level, std::string_view file) {
  std::shared_ptr<spdlog::logger> logger;
  if (file.empty()) {
    logger = spdlog::stderr_logger_mt("korch");
  } else {
    logger = spdlog::basic_logger_mt("korch", std::string(file));
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
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
