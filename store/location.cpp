// Store locations: which backend a path or URL names, and its redaction.
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace korch::store {
namespace {

constexpr std::string_view k_sqlite_prefix = "sqlite:";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Replaces the value of every "password=" parameter (up to '&' or the end).
void redact_password_params(std::string& out) {
  std::size_t query = out.find('?');
  if (query == std::string::npos) return;
  for (std::size_t pos = out.find("password=", query); pos != std::string::npos;
       pos = out.find("password=", pos)) {
    char before = out[pos - 1];
    pos += std::string_view("password=").size();
    if (before != '?' && before != '&') continue;
    std::size_t end = out.find('&', pos);
    if (end == std::string::npos) end = out.size();
    out.replace(pos, end - pos, "****");
    pos += 4;
  }
}

}  // namespace

bool is_postgres_url(std::string_view text) {
  return starts_with(text, "postgres://") || starts_with(text, "postgresql://");
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
  redact_password_params(out);
  return out;
}

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
    return fail(ErrorKind::invalid,
                "store: '" + redact_url(text) + "': unsupported scheme '" + text.substr(0, scheme) +
                    "' (a file path, sqlite:PATH or postgres://...)");
  }
  return Location{Backend::sqlite, text};
}

}  // namespace korch::store
