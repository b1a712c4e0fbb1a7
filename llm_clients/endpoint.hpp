#pragma once
// The client's endpoint registry (module-private: includes curl.h through
// curl_handles.hpp; only llm_clients/*.cpp include it). An Endpoint is one
// registered model: its URL, API key, resolved addresses and connection
// pools, plus the event loop's per-endpoint state (adaptive limit, queue).
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "config/campaign.hpp"
#include "llm_clients/adaptive_limit.hpp"
#include "llm_clients/curl_handles.hpp"
#include "util/error.hpp"

namespace korch::llm {

struct Call;  // one chat call, defined by the event loop (client.cpp)

// One registered model. Immutable after EndpointRegistry::add() except the
// fields marked "loop only", which only the event-loop thread touches.
struct Endpoint {
  config::ModelConfig cfg;
  std::string url;                 // <base_url>/chat/completions
  std::string api_key;             // never logged
  curl::Slist resolve;             // CURLOPT_RESOLVE entry; empty: libcurl resolves
  std::vector<curl::Share> pools;  // connection pools (see k_connections_per_pool)
  // loop only:
  std::size_t next_pool = 0;
  AdaptiveLimit limit;
  int in_flight = 0;
  std::deque<Call*> waiting;

  Endpoint(config::ModelConfig c, int max_limit);
  // `text` with the API key replaced by "****".
  std::string redact(std::string text) const;
  // The pool for the next transfer (round robin), or nullptr when none.
  CURLSH* next_share();
};

// Registered models by id. Thread-safe. Endpoints are never removed, so a
// pointer from find() or all() stays valid while the registry lives. Easy
// handles that used an endpoint's pools must be cleaned up before the
// registry goes (curl_share_cleanup refuses a share still in use).
class EndpointRegistry {
 public:
  // Registers `model`, reading its API key from the environment variable it
  // names. Registering the same id again with the same base_url and model is
  // a no-op. Fails (ErrorKind::invalid) when the id or base_url is empty, the
  // key's variable is named but unset, or the id is taken by another endpoint.
  Result<void> add(const config::ModelConfig& model);
  // The endpoint of `model_id`, or nullptr.
  Endpoint* find(std::string_view model_id) const;
  // Every endpoint, in id order.
  std::vector<Endpoint*> all() const;

 private:
  mutable std::mutex m_mutex;
  std::map<std::string, std::unique_ptr<Endpoint>, std::less<>> m_models;
};

}  // namespace korch::llm
