// Store locations: which backend a path or URL names, and its redaction.
#include <string>
#include <string_view>

#include "store/store.hpp"
#include "util/log.hpp"

namespace korch::store {
namespace {

constexpr std::string_view k_sqlite_prefix = "sqlite:";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool is_postgres_url(std::string_view text) {
  return starts_with(text, "postgres://") || starts_with(text, "postgresql://");
}

std::string redact_url(std::string_view text) { return log::redact_url(text); }

Result<Location> parse_location(const std::string& text) {
  if (text.empty()) return fail(ErrorKind::invalid, "store: empty database path or URL");
  if (is_postgres_url(text)) return Location{Backend::postgres, text};
  if (starts_with(text, k_sqlite_prefix)) {
    std::string path = text.substr(k_sqlite_prefix.size());
    if (starts_with(path, "//")) {
      return fail(ErrorKind::invalid, "store: '" + redact_url(text) +
                                          "': write sqlite:PATH (a file path), not sqlite://");
    }
    if (path.empty()) return fail(ErrorKind::invalid, "store: 'sqlite:' names no file");
    return Location{Backend::sqlite, path};
  }
  if (auto scheme = text.find("://"); scheme != std::string::npos) {
    return fail(ErrorKind::invalid, "store: '" + redact_url(text) + "': unsupported scheme '" +
                                        text.substr(0, scheme) +
                                        "' (a file path, sqlite:PATH or postgres://...)");
  }
  return Location{Backend::sqlite, text};
}

}  // namespace korch::store
