#include "llm_clients/endpoint.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>

#include "llm_clients/url.hpp"
#include "util/log.hpp"

namespace korch::llm {

namespace {

// A 429 burst shrinks an endpoint's limit at most once per this window.
constexpr double k_limit_cooldown_s = 1.0;
// Connections of one endpoint are spread over connection pools of about
// this many transfers each (a CURLSH sharing CURL_LOCK_DATA_CONNECT per
// pool). libcurl 7.88 walks a transfer's whole connection cache when it
// looks for a reusable connection and again in curl_multi_remove_handle, so
// one cache of 5,000 connections costs ~0.3 ms of CPU per request; pools of
// 64 keep that small. All pools belong to the one multi handle and loop.
constexpr int k_connections_per_pool = 64;
constexpr int k_max_pools_per_endpoint = 256;

// Resolves `url`'s host once, returning a CURLOPT_RESOLVE entry
// "host:port:addr[,addr]", or "" for IPv6 literals and failed lookups (then
// libcurl resolves, sharing the multi handle's DNS cache).
std::string resolve_entry(const std::string& url, std::string& error) {
  auto hp = split_url(url);
  if (!hp) {
    error = hp.error().message;
    return "";
  }
  if (hp->ipv6_literal) return "";
  const std::string& h = hp->host;
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, h.c_str(), buf) == 1) {
    // A literal address needs no lookup; the entry keeps libcurl from even
    // calling its resolver for it.
    return fmt::format("{}:{}:{}", h, hp->port, h);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(h.c_str(), hp->port.c_str(), &hints, &res); rc != 0) {
    error = fmt::format("cannot resolve {}: {}", h, gai_strerror(rc));
    return "";
  }
  std::vector<std::string> addrs;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (ai->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, text, sizeof text);
      addrs.emplace_back(text);
    } else if (ai->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, text,
                sizeof text);
      addrs.push_back(fmt::format("[{}]", text));
    }
  }
  freeaddrinfo(res);
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  if (addrs.empty()) return "";
  return fmt::format("{}:{}:{}", h, hp->port, fmt::join(addrs, ","));
}

}  // namespace

Endpoint::Endpoint(config::ModelConfig c, int max_limit)
    : cfg(std::move(c)), limit(max_limit, k_limit_cooldown_s) {}

std::string Endpoint::redact(std::string text) const {
  return log::redact(std::move(text), {api_key});
}

CURLSH* Endpoint::next_share() {
  if (pools.empty()) return nullptr;
  return pools[next_pool++ % pools.size()].get();
}

Result<void> EndpointRegistry::add(const config::ModelConfig& model) {
  if (model.id.empty()) return fail(ErrorKind::invalid, "model has no id");
  if (model.base_url.empty()) {
    return fail(ErrorKind::invalid, fmt::format("model {}: base_url is empty", model.id));
  }
  std::string key;
  if (!model.api_key_env.empty()) {
    const char* value = std::getenv(model.api_key_env.c_str());
    if (value == nullptr || *value == '\0') {
      return fail(ErrorKind::invalid,
                  fmt::format("model {}: environment variable {} (API key) is not set", model.id,
                              model.api_key_env));
    }
    key = value;
  }
  {
    std::lock_guard lock(m_mutex);
    if (auto it = m_models.find(model.id); it != m_models.end()) {
      const auto& old = it->second->cfg;
      if (old.base_url == model.base_url && old.model == model.model) return {};
      return fail(ErrorKind::invalid,
                  fmt::format("model {} is already registered with another endpoint", model.id));
    }
  }
  const int concurrency = std::max(1, model.concurrency);
  auto ep = std::make_unique<Endpoint>(model, concurrency);
  ep->api_key = std::move(key);
  const int pools = std::clamp((concurrency + k_connections_per_pool - 1) / k_connections_per_pool,
                               1, k_max_pools_per_endpoint);
  for (int i = 0; i < pools; ++i) {
    curl::Share share(curl_share_init());
    if (share == nullptr) break;
    curl_share_setopt(share.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    ep->pools.push_back(std::move(share));
  }
  std::string base = model.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  ep->url = base + "/chat/completions";
  std::string error;
  const std::string entry = resolve_entry(ep->url, error);
  if (!entry.empty() && ep->resolve.append(entry.c_str())) {
    KLOG_INFO("[llm {}] resolved once: {}", model.id, entry);
  } else if (!error.empty()) {
    KLOG_WARN("[llm {}] {}; libcurl will resolve per connection", model.id, ep->redact(error));
  }
  std::lock_guard lock(m_mutex);
  m_models.emplace(model.id, std::move(ep));
  return {};
}

Endpoint* EndpointRegistry::find(std::string_view model_id) const {
  std::lock_guard lock(m_mutex);
  auto it = m_models.find(model_id);
  return it == m_models.end() ? nullptr : it->second.get();
}

std::vector<Endpoint*> EndpointRegistry::all() const {
  std::lock_guard lock(m_mutex);
  std::vector<Endpoint*> out;
  out.reserve(m_models.size());
  for (const auto& [id, ep] : m_models) out.push_back(ep.get());
  return out;
}

}  // namespace korch::llm
