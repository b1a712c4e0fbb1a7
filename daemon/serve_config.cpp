#include "daemon/serve_config.hpp"

#include <arpa/inet.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <type_traits>

#include "config/vocabulary.hpp"
#include "util/did_you_mean.hpp"
#include "util/fs.hpp"

namespace korch::daemon {
namespace {

struct Setter {
  ServeKey key;
  std::function<Result<void>(ServeConfig&, const std::string&)> set;
};

Result<void> to_int(const std::string& v, auto& out) {
  try {
    std::size_t n = 0;
    long long x = std::stoll(v, &n);
    if (n != v.size()) throw std::invalid_argument(v);
    out = static_cast<std::remove_reference_t<decltype(out)>>(x);
    return {};
  } catch (const std::exception&) {
    return fail(ErrorKind::invalid, "must be an integer (got '" + v + "')");
  }
}

Result<void> to_double(const std::string& v, double& out) {
  try {
    std::size_t n = 0;
    out = std::stod(v, &n);
    if (n != v.size()) throw std::invalid_argument(v);
    return {};
  } catch (const std::exception&) {
    return fail(ErrorKind::invalid, "must be a number (got '" + v + "')");
  }
}

#define KSTR(name, field, doc)                                                  \
  Setter {                                                                      \
    {name, "", doc}, [](ServeConfig& c, const std::string& v) -> Result<void> { \
      c.field = v;                                                              \
      return {};                                                                \
    }                                                                           \
  }
#define KENUM(name, field, doc)                                                            \
  Setter {                                                                                 \
    {name, "", doc, enum_name_list<std::remove_cvref_t<decltype(ServeConfig{}.field)>>()}, \
        [](ServeConfig& c, const std::string& v) -> Result<void> {                         \
          auto e = config::from_string<std::remove_cvref_t<decltype(c.field)>>(v);         \
          if (!e) return fail(ErrorKind::invalid, "unknown value '" + v + "'");            \
          c.field = *e;                                                                    \
          return {};                                                                       \
        }                                                                                  \
  }
#define KINT(name, field, doc)                                                                  \
  Setter {                                                                                      \
    {name, "", doc},                                                                            \
        [](ServeConfig& c, const std::string& v) -> Result<void> { return to_int(v, c.field); } \
  }
#define KNUM(name, field, doc)                                                                     \
  Setter {                                                                                         \
    {name, "", doc},                                                                               \
        [](ServeConfig& c, const std::string& v) -> Result<void> { return to_double(v, c.field); } \
  }

#define KBOOL(name, field, doc)                                                                    \
  Setter {                                                                                         \
    {name, "", doc, {"true", "false"}}, [](ServeConfig& c, const std::string& v) -> Result<void> { \
      if (v != "true" && v != "false")                                                             \
        return fail(ErrorKind::invalid, "must be true or false (got '" + v + "')");                \
      c.field = v == "true";                                                                       \
      return {};                                                                                   \
    }                                                                                              \
  }

const std::vector<Setter>& setters() {
  static const std::vector<Setter> table = [] {
    std::vector<Setter> t = {
        KSTR("listen", listen,
             "Address of the HTTP API, metrics and dashboard (host:port; port 0 = any)."),
        KSTR("env_listen", env_listen,
             "Address of the OpenEnv endpoint (WebSocket /ws and HTTP), or \"off\"."),
        KSTR("db", db,
             "The store the daemon owns (a SQLite file, locked; or a postgres:// URL, "
             "docs/postgres.md); submitted campaigns run in it."),
        KSTR("token_file", token_file,
             "File whose first line is the bearer token (else KORCH_API_TOKEN)."),
        KSTR("state_dir", state_dir,
             "Submitted campaign files and their states; default <db>.serve."),
        KSTR("log_level", log_level, "trace, debug, info, warn, error."),
        KINT("http_threads", http_threads,
             "API pool threads; each serves one connection at a time."),
        KINT("http_queue", http_queue,
             "Accepted connections waiting for a pool thread before accept slows."),
        KINT("listen_backlog", listen_backlog, "Listen backlog of the API socket."),
        KINT("max_body_bytes", max_body_bytes, "Largest request body; larger ones get 413."),
        KINT("read_timeout_s", read_timeout_s, "Seconds to read a request."),
        KINT("write_timeout_s", write_timeout_s, "Seconds to write a response chunk."),
        KINT("keep_alive_s", keep_alive_s, "Idle seconds a keep-alive connection is held."),
        KINT("sse_max_clients", sse_max_clients,
             "Open progress streams (/api/events); more get 503."),
        KNUM("sse_interval_s", sse_interval_s, "Seconds between progress events."),
        KNUM("sse_keepalive_s", sse_keepalive_s, "Seconds between keep-alive comments."),
        KNUM("eval_timeout_s", eval_timeout_s,
             "Longest wait of POST /api/evaluations for a verdict."),
        KINT("env.max_sessions", env_max_sessions,
             "Concurrent OpenEnv sessions; more get CAPACITY_REACHED."),
        KNUM("env.idle_timeout_s", env_idle_timeout_s,
             "An OpenEnv session idle this long is closed."),
        KSTR("env.tasks_dir", env_tasks_dir,
             "KernelBench folder for reset task ids like \"1/19\"."),
        Setter{{"env.levels", "",
                "Levels of env.tasks_dir in the pool that a reset without a task picks from "
                "(\"1,2\")."},
               [](ServeConfig& c, const std::string& v) -> Result<void> {
                 std::vector<int> levels;
                 std::size_t pos = 0;
                 while (pos <= v.size()) {
                   auto comma = v.find(',', pos);
                   auto part = v.substr(pos, comma == std::string::npos ? v.npos : comma - pos);
                   int level = 0;
                   if (auto r = to_int(part, level); !r || level < 1)
                     return fail(ErrorKind::invalid,
                                 "must be levels like \"1,2\" (got '" + v + "')");
                   levels.push_back(level);
                   if (comma == std::string::npos) break;
                   pos = comma + 1;
                 }
                 c.env_levels = levels;
                 return {};
               }},
        KSTR("env.ids", env_ids, "Task numbers in the reset pool (\"1-10,15\"); empty = all."),
        KSTR("env.order", env_order,
             "How a reset without a task picks from the pool: sequential (the next task, across "
             "sessions) or random (drawn from env.seed)."),
        KINT("env.seed", env_seed, "Seed of env.order = random."),
        KINT("env.max_turns", env_max_turns, "Steps per environment episode."),
        KSTR("env.campaign", env_name,
             "Campaign name under which environment episodes are stored."),
        KENUM("evaluator.mode", evaluator.mode,
              "mock, cpu or gpu: one-off evaluations and environment steps."),
        KENUM("evaluator.tolerance", evaluator.tolerance, "strict or tf32."),
        KENUM("evaluator.reward", evaluator.reward, "speedup, roofline or beat_baseline."),
        KENUM("evaluator.torch_ops", evaluator.torch_ops, "allow or forbid."),
        KINT("evaluator.workers", evaluator.workers, "Concurrent evaluations."),
        KNUM("evaluator.timeout_s", evaluator.timeout_s, "Wall clock per evaluation."),
        KINT("evaluator.memory_budget_mb", evaluator.memory_budget_mb, "Memory per evaluation."),
        KSTR("evaluator.cache_dir", evaluator.cache_dir,
             "Compile cache; default <db dir>/korch-cache."),
        KNUM("evaluator.mock_latency_s", evaluator.mock_latency_s,
             "Mock mode: simulated evaluation time."),
        KBOOL("evaluator.remote", evaluator.remote,
              "One-off evaluations and OpenEnv steps on korch workers through the store's queue "
              "(postgres:// db); a submitted campaign follows its own evaluator.remote."),
    };
    for (auto& s : t) {
      if (s.key.name == "log_level") s.key.choices = enum_name_list<config::LogLevel>();
      if (s.key.name == "env.order") s.key.choices = {"sequential", "random"};
      std::string f = "--" + s.key.name;
      for (auto& ch : f) {
        if (ch == '_' || ch == '.') ch = '-';
      }
      s.key.flag = f;
    }
    return t;
  }();
  return table;
}

const Setter* find_setter(const std::string& name) {
  for (auto& s : setters()) {
    if (s.key.name == name || s.key.flag == name) return &s;
  }
  return nullptr;
}

// " (did you mean 'x'?)" among the keys, or the flags for a "--" name.
std::string key_suggestion(const std::string& name) {
  std::vector<std::string> names;
  for (auto& s : setters()) names.push_back(name.starts_with("--") ? s.key.flag : s.key.name);
  return suggestion(name, names);
}

// Sets one key; a key with a closed list of values names them.
Result<void> set_value(const Setter& s, ServeConfig& cfg, const std::string& value) {
  const auto& choices = s.key.choices;
  if (!choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string list;
    for (auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    return fail(ErrorKind::invalid,
                "must be one of " + list + ", not '" + value + "'" + suggestion(value, choices));
  }
  return s.set(cfg, value);
}

std::string node_text(const toml::node& n) {
  if (auto s = n.value<std::string>()) return *s;
  if (auto b = n.value_exact<bool>()) return *b ? "true" : "false";
  if (auto i = n.value_exact<std::int64_t>()) return std::to_string(*i);
  if (auto d = n.value_exact<double>()) return std::to_string(*d);
  if (auto* a = n.as_array()) {  // levels = [1, 2] reads as "1,2"
    std::string out;
    for (auto& e : *a) out += (out.empty() ? "" : ",") + node_text(e);
    return out;
  }
  return "";
}

Result<void> walk(const toml::table& t, const std::string& prefix, const std::string& file,
                  ServeConfig& cfg) {
  for (auto& [k, v] : t) {
    std::string name = prefix + std::string(k.str());
    if (auto* sub = v.as_table()) {
      if (auto r = walk(*sub, name + ".", file, cfg); !r) return r;
      continue;
    }
    auto* s = find_setter(name);
    if (!s) {
      return fail(ErrorKind::invalid, file + ":" + std::to_string(v.source().begin.line) +
                                          ": unknown key '" + name + "'" + key_suggestion(name));
    }
    if (auto r = set_value(*s, cfg, node_text(v)); !r) {
      return fail(ErrorKind::invalid, file + ":" + std::to_string(v.source().begin.line) + ": '" +
                                          name + "' " + r.error().message);
    }
  }
  return {};
}

}  // namespace

const std::vector<ServeKey>& serve_keys() {
  static const std::vector<ServeKey> keys = [] {
    std::vector<ServeKey> k;
    for (auto& s : setters()) k.push_back(s.key);
    return k;
  }();
  return keys;
}

Result<ServeConfig> load_serve_config(const std::string& file,
                                      const std::multimap<std::string, std::string>& flags) {
  ServeConfig cfg;
  if (!file.empty()) {
    auto text = read_file(file);
    if (!text) return std::unexpected(with_kind(text.error(), ErrorKind::invalid));
    try {
      auto t = toml::parse(*text, file);
      if (auto r = walk(t, "", file, cfg); !r) return std::unexpected(r.error());
    } catch (const toml::parse_error& e) {
      return fail(ErrorKind::invalid, file + ":" + std::to_string(e.source().begin.line) + ":" +
                                          std::to_string(e.source().begin.column) + ": " +
                                          std::string(e.description()));
    }
  }
  for (auto& [flag, value] : flags) {
    if (flag == "--config" || flag == "--help") continue;
    auto* s = find_setter(flag);
    const bool is_flag = flag.starts_with("--");
    if (!s) {
      return fail(ErrorKind::invalid, (is_flag ? "unknown flag " : "unknown key '") + flag +
                                          (is_flag ? "" : "'") + key_suggestion(flag) +
                                          " (korch serve --print-keys lists them)");
    }
    if (auto r = set_value(*s, cfg, value); !r)
      return fail(ErrorKind::invalid,
                  (is_flag ? flag : "'" + flag + "'") + " " + r.error().message);
  }
  if (cfg.http_threads < 2) return fail(ErrorKind::invalid, "'http_threads' must be >= 2");
  if (cfg.sse_max_clients >= cfg.http_threads) {
    return fail(ErrorKind::invalid,
                "'sse_max_clients' must be below 'http_threads' (a stream holds a pool thread)");
  }
  if (cfg.max_body_bytes < 1024)
    return fail(ErrorKind::invalid, "'max_body_bytes' must be >= 1024");
  if (cfg.env_max_sessions < 1) return fail(ErrorKind::invalid, "'env.max_sessions' must be >= 1");
  if (cfg.env_max_turns < 1) return fail(ErrorKind::invalid, "'env.max_turns' must be >= 1");
  // Beside a SQLite file; "korch.serve" in the working directory for a URL.
  if (cfg.state_dir.empty())
    cfg.state_dir = cfg.db.find("://") == std::string::npos ? cfg.db + ".serve" : "korch.serve";
  auto api = split_host_port(cfg.listen);
  if (!api) return fail(ErrorKind::invalid, "'listen' " + api.error().message);
  cfg.api_address = *api;
  if (cfg.env_listen != "off") {
    auto env = split_host_port(cfg.env_listen);
    if (!env) return fail(ErrorKind::invalid, "'env_listen' " + env.error().message);
    cfg.env_address = *env;
  }
  return cfg;
}

Result<Token> load_token(const ServeConfig& cfg) {
  if (cfg.token_file.empty()) {
    if (const char* t = std::getenv("KORCH_API_TOKEN"); t && *t)
      return Token{std::string(t), "KORCH_API_TOKEN"};
    return Token{};
  }
  std::ifstream in(cfg.token_file);
  if (!in) return fail(ErrorKind::invalid, cfg.token_file + ": cannot read the token file");
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty())
    return fail(ErrorKind::invalid, cfg.token_file + ": the token file's first line is empty");
  return Token{line, cfg.token_file};
}

Result<void> check_token(const ServeConfig& cfg, const Token& token) {
  std::string beyond;
  if (!is_loopback_host(cfg.api_address.host)) beyond = cfg.listen;
  if (beyond.empty() && cfg.env_address && !is_loopback_host(cfg.env_address->host))
    beyond = cfg.env_listen;
  if (beyond.empty()) return {};
  if (token.value.empty()) {
    return fail(ErrorKind::invalid, "refusing to listen on " + beyond +
                                        " without a token: set KORCH_API_TOKEN or --token-file");
  }
  if (token.value.size() < k_min_token_chars) {
    return fail(ErrorKind::invalid,
                "refusing to listen on " + beyond + ": the token from " + token.source + " has " +
                    std::to_string(token.value.size()) + " characters; beyond loopback it needs " +
                    std::to_string(k_min_token_chars) + " or more");
  }
  return {};
}

std::optional<std::string> bearer_credentials(std::string_view h) {
  constexpr std::string_view k_scheme = "bearer";
  if (h.size() <= k_scheme.size() || h[k_scheme.size()] != ' ') return std::nullopt;
  for (std::size_t i = 0; i < k_scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(h[i])) != k_scheme[i]) return std::nullopt;
  }
  auto rest = h.substr(k_scheme.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return std::string(rest);
}

bool token_equal(std::string_view given, std::string_view token) {
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i)
    diff |= static_cast<unsigned char>((i < given.size() ? given[i] : 0) ^ token[i]);
  return diff == 0;
}

Result<HostPort> split_host_port(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return fail(ErrorKind::invalid, "'" + address + "' is not host:port");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  if (auto r = to_int(address.substr(colon + 1), port); !r || port < 0 || port > 65535) {
    return fail(ErrorKind::invalid, "'" + address + "': bad port");
  }
  return HostPort{host, port};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

}  // namespace korch::daemon
