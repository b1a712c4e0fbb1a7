#pragma once
// The OpenEnv environment endpoint of `korch serve` (Boost.Beast): WebSocket
// /ws speaking OpenEnv's frames, plus HTTP /reset, /step, /state, /health,
// /metadata, /schema, on its own port (env_listen): cpp-httplib 0.11 cannot
// hand a connection over to a WebSocket server. Every reset and step is an
// event of the episode engine (agent/episode.hpp, an external episode) under
// the campaign `env.campaign`: this file translates, posts and replies, and
// keeps one episode in memory per id, shared by the sessions attached to it
// (a reconnect during a step waits for that step's result; docs/api.md).
#include <memory>
#include <vector>

#include "daemon/daemon.hpp"
#include "daemon/http_api.hpp"

namespace korch::daemon {

// `target` with the value of every `token=` query parameter replaced by
// "[redacted]": what the log may show of a URL.
std::string redact_token(const std::string& target);

// The routes of the environment port, in OpenAPI path form.
const std::vector<Route>& env_routes();

class EnvServer {
 public:
  static Result<std::unique_ptr<EnvServer>> bind(Daemon& daemon, const std::string& token);
  ~EnvServer();
  int port() const;
  void start();  // serves on its own threads
  void stop();   // closes every session, joins

  struct Impl;

 private:
  std::unique_ptr<Impl> m;
};

}  // namespace korch::daemon
