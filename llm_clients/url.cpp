#include "llm_clients/url.hpp"

#include "llm_clients/curl_handles.hpp"

namespace korch::llm {

Result<HostPort> split_url(const std::string& url) {
  auto invalid = [&] {
    return fail(ErrorKind::invalid, url + ": not a URL (expected http://host:port/...)");
  };
  curl::Url handle(curl_url());
  if (handle == nullptr) return fail(url + ": out of memory");
  if (curl_url_set(handle.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return invalid();
  char* host_raw = nullptr;
  char* port_raw = nullptr;
  const bool ok = curl_url_get(handle.get(), CURLUPART_HOST, &host_raw, 0) == CURLUE_OK;
  curl::String host(host_raw);
  if (!ok ||
      curl_url_get(handle.get(), CURLUPART_PORT, &port_raw, CURLU_DEFAULT_PORT) != CURLUE_OK) {
    return invalid();
  }
  curl::String port(port_raw);
  HostPort hp;
  hp.host = host.get();
  hp.port = port.get();
  // An IPv6 literal comes back as "[::1]"; getaddrinfo wants "::1".
  if (hp.host.size() > 1 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
    hp.ipv6_literal = true;
  }
  if (hp.host.empty()) return invalid();
  return hp;
}

}  // namespace korch::llm
