#pragma once
// Level-gated logging (STYLE.md habit 10). The KLOG_* macros skip argument
// formatting when the level is off. Prefix lines with the entity they are
// about ("[ep e-1234 t3]"). Never log secrets; log bodies only at debug.
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace korch::log {

// Configures the process-wide logger: level name ("trace".."off") and
// whether to write to stderr (default) or a file.
void init(std::string_view level, std::string_view file = {});

// Replaces every occurrence of each secret in `text` with "****".
std::string redact(std::string text, std::initializer_list<std::string_view> secrets);

}  // namespace korch::log

#define KLOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define KLOG_INFO(...) spdlog::info(__VA_ARGS__)
#define KLOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define KLOG_ERROR(...) spdlog::error(__VA_ARGS__)
