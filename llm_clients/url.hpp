#pragma once
// The one URL parser of the LLM client and the endpoint probe: libcurl's
// (CURLU), so a base_url means the same host and port to both, and to the
// transfers themselves.
#include <string>

#include "util/error.hpp"

namespace korch::llm {

struct HostPort {
  std::string host;           // an IPv6 literal without its brackets ("::1")
  std::string port;           // the scheme's default port when the URL has none
  bool ipv6_literal = false;  // the URL named the host as "[...]"
};

// Host and port of `url`. Fails (ErrorKind::invalid) with "<url>: not a URL
// (expected http://host:port/...)" when libcurl cannot parse it or it names
// no host.
Result<HostPort> split_url(const std::string& url);

}  // namespace korch::llm
