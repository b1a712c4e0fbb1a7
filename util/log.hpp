#pragma once
// Level-gated logging (STYLE.md habit 10). The level is a run-time choice
// (log::init, log::set_level): every KLOG_* line is compiled in, and a line
// whose level is off costs one comparison, its arguments are not even
// evaluated. Prefix lines with the entity they are about ("[ep e-1234 t3]").
// Never log secrets; log bodies only at debug.
#include <spdlog/spdlog.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace korch::log {

// Configures the process-wide logger: level name ("trace".."off", see
// set_level) and whether to write to stderr (default) or a file. May be
// called again; the new logger replaces the old one.
void init(std::string_view level, std::string_view file = {});

// Sets the process-wide level at run time. Accepts spdlog's names ("trace",
// "debug", "info", "warn"/"warning", "error"/"err", "critical", "off"); an
// unknown name turns logging off, as spdlog::level::from_str does.
void set_level(std::string_view level);

// Whether a line at `level` would be written by the default logger.
inline bool enabled(spdlog::level::level_enum level) { return spdlog::should_log(level); }

// Replaces every occurrence of each secret in `text` with "****".
std::string redact(std::string text, std::initializer_list<std::string_view> secrets);

// `text` with a URL's password ("scheme://user:PASSWORD@host") and every
// "password=" query parameter replaced by "****"; text that is no URL is
// returned unchanged. For store locations (store::redact_url) and config values.
std::string redact_url(std::string_view text);

}  // namespace korch::log

// One macro per level. KLOG_DEBUG does not use SPDLOG_DEBUG: that one is
// removed by the preprocessor unless SPDLOG_ACTIVE_LEVEL is defined, which
// made `--log-level debug` show nothing.
#define KLOG_AT(level, ...)                                              \
  do {                                                                   \
    if (::korch::log::enabled(level)) ::spdlog::log(level, __VA_ARGS__); \
  } while (0)
#define KLOG_DEBUG(...) KLOG_AT(::spdlog::level::debug, __VA_ARGS__)
#define KLOG_INFO(...) KLOG_AT(::spdlog::level::info, __VA_ARGS__)
#define KLOG_WARN(...) KLOG_AT(::spdlog::level::warn, __VA_ARGS__)
#define KLOG_ERROR(...) KLOG_AT(::spdlog::level::err, __VA_ARGS__)
