#pragma once
// The HTTP API of `korch serve` on Debian's cpp-httplib 0.11 (docs/api.md,
// docs/openapi.json). Bounded: a fixed pool with a bounded queue (when it is
// full the accept thread serves the connection itself, so accepting slows
// down instead of queueing without limit), a body limit (413), read/write
// timeouts, a cap on progress streams (503), and streams that end within
// one tick of stop().
#include <memory>
#include <string>
#include <vector>

#include "daemon/daemon.hpp"
#include "util/error.hpp"

namespace korch::daemon {

struct Route {
  std::string method;  // GET | POST
  std::string path;    // OpenAPI form: /api/campaigns/{id}
  bool auth = true;    // needs the bearer token
};

// Every route the API server registers, in OpenAPI path form.
const std::vector<Route>& api_routes();

class HttpApi {
 public:
  // Binds `cfg.listen` (does not serve yet). `token` "" = no auth (loopback only).
  static Result<std::unique_ptr<HttpApi>> bind(Daemon& daemon, const std::string& token);
  ~HttpApi();
  int port() const;
  // Serves until stop(); blocks.
  void serve();
  // Stops accepting, ends streams, returns once serve() returned.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> m;
};

}  // namespace korch::daemon
