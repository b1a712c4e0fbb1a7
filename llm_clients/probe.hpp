#pragma once
// A fast reachability check of an endpoint before a run starts, so an
// unreachable LLM server is one clear error instead of minutes of retries.
#include <string>

#include "util/error.hpp"

namespace korch::llm {

// Resolves the host of `base_url` and opens (then closes) a TCP connection
// within `timeout_s`. Fails (ErrorKind::unavailable) with "<base_url>:
// <reason>" when `base_url` does not parse, its host does not resolve or no
// address accepts the connection.
Result<void> probe_endpoint(const std::string& base_url, double timeout_s);

}  // namespace korch::llm
