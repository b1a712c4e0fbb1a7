#pragma once
// `korch serve` settings: defaults < --config FILE (TOML) < flags. Every key
// is also a flag: `listen` is --listen, `env.max_sessions` is
// --env-max-sessions. The API token is never a key: it comes from
// KORCH_API_TOKEN or the file named by `token_file`, and is never logged or
// stored.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/campaign.hpp"
#include "util/error.hpp"

namespace korch::daemon {

// A listen address, parsed once by load_serve_config.
struct HostPort {
  std::string host;
  int port = 0;
};

struct ServeConfig {
  std::string listen = "127.0.0.1:8765";  // the HTTP API, metrics and dashboard
  std::string env_listen =
      "off";  // e.g. "127.0.0.1:8766"  // the OpenEnv endpoint (WebSocket /ws + HTTP); "off" = none
  std::string db = "korch.db";
  std::string token_file;  // "" = KORCH_API_TOKEN, or no token (loopback only)
  std::string state_dir;   // "" = <db>.serve (submitted campaign files, their states)
  std::string log_level = "info";
  int http_threads = 16;  // API pool threads (one per open connection)
  int http_queue = 64;    // connections waiting for a pool thread
  int listen_backlog = 1024;
  std::int64_t max_body_bytes = 1 << 20;  // larger requests get 413
  int read_timeout_s = 10;
  int write_timeout_s = 10;
  int keep_alive_s = 5;
  int sse_max_clients = 8;      // open progress streams; more get 503
  double sse_interval_s = 1;    // progress event period
  double sse_keepalive_s = 15;  // comment lines between events when nothing changes
  double eval_timeout_s = 600;  // one-off evaluation: longest wait for the verdict
  // OpenEnv endpoint
  int env_max_sessions = 16;
  double env_idle_timeout_s = 600;
  std::string env_tasks_dir;  // KernelBench folder that task ids (level/number) name
  // The pool a reset without a task picks from: env_tasks_dir's tasks of
  // these levels and ids, in order (one after another, across sessions) or
  // drawn at random from env_seed.
  std::vector<int> env_levels = {1};
  std::string env_ids;                     // "1-10,15"; "" = all
  std::string env_order = "sequential";    // sequential | random
  std::uint64_t env_seed = 0;              // random order: the draws' seed
  int env_max_turns = 10;                  // steps per episode; the last one ends it
  config::EvaluatorConfig evaluator;       // one-off evaluations and environment steps
  std::string env_name = "korch-openenv";  // campaign name that holds environment episodes
  // Derived by load_serve_config from `listen` / `env_listen` (nullopt: "off").
  HostPort api_address;
  std::optional<HostPort> env_address;
};

// One documented key.
struct ServeKey {
  std::string name;  // "listen", "env.max_sessions", "evaluator.mode"
  std::string flag;  // "--listen", "--env-max-sessions", "--evaluator-mode"
  std::string doc;
  std::vector<std::string> choices;  // the values it takes, when a closed list
};
const std::vector<ServeKey>& serve_keys();

// Loads `file` (if not empty) then applies `flags` (a flag "--env-max-sessions"
// or a key "env.max_sessions", as `--set KEY=VALUE` gives it -> value). Fails
// with one line naming the file, the key or the flag, the closest key of an
// unknown one and the choices of a closed list.
Result<ServeConfig> load_serve_config(const std::string& file,
                                      const std::multimap<std::string, std::string>& flags);

// The bearer token and where it came from ("KORCH_API_TOKEN" or the file's
// path, for messages; never the value).
struct Token {
  std::string value;  // "" = none
  std::string source;
};

// The shortest token a daemon listening beyond loopback accepts.
inline constexpr std::size_t k_min_token_chars = 16;

// The token: the first line of token_file when one is set (an empty first
// line is an error), else KORCH_API_TOKEN; the flag beats the environment,
// as everywhere. No token at all is Token{}.
Result<Token> load_token(const ServeConfig& cfg);

// One rule, wherever the token came from: a daemon with a listener beyond
// loopback (API or OpenEnv) needs a token of at least k_min_token_chars; on
// loopback any token, or none, will do.
Result<void> check_token(const ServeConfig& cfg, const Token& token);

// The credentials of an Authorization header value of the Bearer scheme
// ("Bearer T", "bearer T": RFC 7235 schemes are case-insensitive), or nullopt.
std::optional<std::string> bearer_credentials(std::string_view authorization);

// Whether `given` is the token, compared in constant time (of the token's length).
bool token_equal(std::string_view given, std::string_view token);

// "127.0.0.1:8765" -> host, port. Fails on a bad address.
Result<HostPort> split_host_port(const std::string& address);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace korch::daemon
