// korch serve: the daemon (daemon/): HTTP API, metrics, OpenEnv endpoint.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "daemon/daemon.hpp"
#include "daemon/http_api.hpp"
#include "daemon/openenv.hpp"
#include "daemon/serve_config.hpp"
#include "store/store.hpp"
#include "tools/korch/cli.hpp"
#include "util/log.hpp"

namespace korch::cli {

int cmd_serve(const Args& parsed) {
  const Args* args = &parsed;
  if (args->has("--print-routes")) {
    for (auto& r : daemon::api_routes())
      std::printf("api %s %s\n", r.method.c_str(), r.path.c_str());
    for (auto& r : daemon::env_routes())
      std::printf("env %s %s\n", r.method.c_str(), r.path.c_str());
    return k_exit_ok;
  }
  if (args->has("--print-keys")) {
    for (auto& k : daemon::serve_keys())
      std::printf("%s\t%s\t%s\n", k.name.c_str(), k.flag.c_str(), k.doc.c_str());
    return k_exit_ok;
  }
  if (!args->positional.empty()) {
    std::fprintf(stderr,
                 "korch serve: unexpected argument '%s'; campaigns are submitted over the API\n",
                 args->positional[0].c_str());
    return k_exit_usage;
  }
  // Every key is a flag (--env-max-sessions) and a --set (env.max_sessions=N).
  std::multimap<std::string, std::string> flags;
  for (const auto& [flag, value] : args->flags) {
    if (flag == "--print-keys" || flag == "--print-routes" || flag == "--config") continue;
    if (flag != "--set") {
      flags.emplace(flag, value);
      continue;
    }
    auto eq = value.find('=');
    flags.emplace(value.substr(0, eq), value.substr(eq + 1));
  }
  auto cfg = daemon::load_serve_config(args->get("--config").value_or(""), flags);
  if (!cfg) return report_failure("serve", cfg.error());
  log::init(cfg->log_level);
  auto loaded_token = daemon::load_token(*cfg);
  if (!loaded_token) return report_failure("serve", loaded_token.error());
  if (auto ok = daemon::check_token(*cfg, *loaded_token); !ok)
    return report_failure("serve", ok.error());
  auto token = &loaded_token->value;
  // No other process may read this one's memory (API keys, the token).
  ::prctl(PR_SET_DUMPABLE, 0);
  // Every thread started from here on inherits the blocked signals; this
  // thread takes them with sigwait.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // The store's folder is made (a first `--db runs/k.db` needs no mkdir).
  if (auto loc = store::parse_location(cfg->db); loc && loc->backend == store::Backend::sqlite) {
    auto folder = std::filesystem::path(loc->target).parent_path();
    std::error_code ec;
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    if (ec) {
      return report_failure(
          "serve", ErrorKind::invalid,
          fmt::format("cannot create {}, the folder of --db: {}", folder.string(), ec.message()));
    }
  }
  auto d = daemon::Daemon::open(*cfg);
  if (!d) return report_failure("serve", d.error());
  auto& dm = **d;
  auto api = daemon::HttpApi::bind(dm, *token);
  if (!api) return report_failure("serve", api.error());
  std::unique_ptr<daemon::EnvServer> env;
  if (cfg->env_address) {
    auto e = daemon::EnvServer::bind(dm, *token);
    if (!e) return report_failure("serve", e.error());
    env = std::move(*e);
  }
  // Stored campaigns are known before the first request is answered (a client
  // that asked right after LISTEN used to be told "no campaign" for one that
  // existed); connections made meanwhile wait in the listen backlog.
  dm.resume_all();
  std::thread api_thread([&] { (*api)->serve(); });
  if (env) env->start();
  const std::string& host = cfg->api_address.host;
  // Where the token came from, never the token itself.
  const std::string auth = token->empty() ? std::string("no token: loopback only")
                                          : "bearer token required, from " + loaded_token->source;
  std::fprintf(
      stderr, "korch serve: API on http://%s:%d (db %s, %s)%s\n", host.c_str(), (*api)->port(),
      store::redact_url(dm.config().db).c_str(), auth.c_str(),
      env ? fmt::format(", OpenEnv on ws://{}:{}/ws", cfg->env_address->host, env->port()).c_str()
          : "");
  // OpenEnv's client sends no header: its base URL carries the token, taken
  // literally (a base64 token's "+", "/" and "=" included).
  if (env && !token->empty()) {
    std::fprintf(stderr, "korch serve: OpenEnv base_url: http://%s:%d/?token=<the token>\n",
                 cfg->env_address->host.c_str(), env->port());
  }
  // Machine-readable, for scripts and tests.
  std::printf("LISTEN api %d\n", (*api)->port());
  if (env) std::printf("LISTEN env %d\n", env->port());
  std::fflush(stdout);

  int sig = 0;
  ::sigwait(&sigs, &sig);
  std::fprintf(stderr,
               "korch serve: %s: stopping (in-flight work commits or is abandoned; a second signal "
               "exits now)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::thread second([sigs] {
    int s = 0;
    ::sigwait(&sigs, &s);
    ::_exit(k_exit_interrupted);
  });
  second.detach();
  if (env) env->stop();
  (*api)->stop();
  api_thread.join();
  dm.stop();
  std::fprintf(stderr, "korch serve: stopped\n");
  return k_exit_ok;
}

}  // namespace korch::cli
