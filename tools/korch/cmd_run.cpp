// korch run / resume.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <random>

#include "agent/campaign_runner.hpp"
#include "agent/runner.hpp"
#include "config/loader.hpp"
#include "evaluator/evaluator.hpp"
#include "store/store.hpp"
#include "tools/korch/cli.hpp"
#include "tools/korch/common.hpp"
#include "util/file_lock.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace korch::cli {
namespace {

constexpr double k_probe_timeout_s = 5;

std::atomic<bool> g_stop{false};
std::atomic<int> g_signals{0};

extern "C" void on_signal(int) {
  g_stop.store(true);
  // A second Ctrl-C exits at once; the store stays consistent (WAL).
  if (g_signals.fetch_add(1) >= 1) _exit(exit_code(ErrorKind::interrupted));
}

std::string owner_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host, ::getpid(), rd());
}

std::string fmt_duration(double s) {
  if (s < 0) return "?";
  if (s < 120) return fmt::format("{:.0f}s", s);
  if (s < 7200) return fmt::format("{:.0f}m", s / 60);
  return fmt::format("{:.1f}h", s / 3600);
}

}  // namespace

int cmd_run(const Args& args, bool resume_only) {
  const char* verb = resume_only ? "resume" : "run";
  if (args.positional.size() != 1) {
    return report_failure(verb, ErrorKind::invalid,
                          "expected one CAMPAIGN.toml (see korch --help)");
  }
  // --db is the store, as on every command that opens one: the key
  // store.url, set as a --set would set it (it wins over the TOML's db_path).
  auto overrides = args.all("--set");
  if (auto db = args.get("--db")) {
    for (const auto& o : overrides) {
      if (o.starts_with("store.url=") || o.starts_with("db_path=")) {
        return report_failure(
            verb, ErrorKind::invalid,
            "give the store once: --db or --set " + o.substr(0, o.find('=')) + "=, not both");
      }
    }
    overrides.push_back("store.url=" + *db);
  }
  auto loaded = config::load_campaign(args.positional[0], config::process_environment(), overrides);
  // Every failure of the loader is bad configuration.
  if (!loaded) return report_failure(verb, with_kind(loaded.error(), ErrorKind::invalid));
  const auto& cfg = loaded->config;
  log::init(args.get("--log-level").value_or(std::string(to_string(cfg.log_level))));
  for (auto& w : loaded->warnings) KLOG_WARN("{}", w);
  // No other process may read this one's memory (API keys live here).
  ::prctl(PR_SET_DUMPABLE, 0);

  auto location = store::parse_location(cfg.db_path);
  if (!location) return report_failure(verb, location.error());
  // A SQLite file is locked for this process; a PostgreSQL store relies on
  // the campaign lease alone (its holders may live on other hosts).
  bool sqlite = location->backend == store::Backend::sqlite;
  std::optional<FileLock> lock;
  if (sqlite) {
    auto taken = FileLock::acquire(FileLock::path_for_db(location->target));
    if (!taken) return report_failure(verb, taken.error());
    lock.emplace(std::move(*taken));
  }
  const std::string db_name = store::redact_url(cfg.db_path);
  store::Options so;
  so.path = cfg.db_path;
  so.synchronous = to_string(cfg.synchronous);
  auto st = store::Store::open(so);
  if (!st) return report_failure(verb, st.error());
  auto& store = **st;
  auto campaign_id = ids::campaign_id(cfg.name);
  if (resume_only) {
    auto c = store.get_campaign(campaign_id);
    if (!c || !*c) {
      return report_failure(
          "resume", ErrorKind::invalid,
          fmt::format("{} has no campaign '{}' to resume; use korch run", db_name, cfg.name));
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);

  bool show_progress = !args.has("--no-progress");
  bool tty = ::isatty(STDERR_FILENO);
  agent::RunOptions opts;
  opts.owner = owner_id();
  opts.holds_db_lock = sqlite;
  opts.stop = &g_stop;
  opts.progress_interval_s = tty ? 1.0 : 5.0;
  if (show_progress) {
    opts.on_progress = [tty](const agent::Progress& p) {
      auto line = fmt::format(
          "episodes {}/{} done, {} running, {} failed | turns {} | tokens {} | ${:.4f} | "
          "elapsed {} | ETA {}",
          p.final, p.episodes, p.running, p.failed, p.turns, p.tokens, p.cost_usd,
          fmt_duration(p.elapsed_s), fmt_duration(p.eta_s));
      if (tty) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      std::fflush(stderr);
    };
  }
  agent::RunnerHooks hooks;
  hooks.probe_timeout_s = k_probe_timeout_s;
  hooks.on_ready = [&](const agent::CampaignPlan& plan, const evaluator::Evaluator& evaluator) {
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    if (evaluator.mode() == config::EvalMode::mock) {
      std::fprintf(stderr, "korch: evaluator is MOCK — verdicts and timings are fake\n");
    }
    std::fprintf(stderr,
                 "korch: campaign '%s' (%s), %zu task(s) x %zu model(s) x %d sample(s), db %s\n",
                 cfg.name.c_str(), campaign_id.c_str(), plan.tasks.size(), cfg.models.size(),
                 cfg.samples_per_task, db_name.c_str());
    for (const auto& e : plan.excluded) {
      std::fprintf(stderr, "korch: left out %s, flagged by korch tasks validate: %s\n",
                   e.task_id.c_str(), e.issues.empty() ? "" : e.issues.front().c_str());
    }
    if (cfg.strategy.kind != config::StrategyKind::grid) {
      std::fprintf(stderr,
                   "korch: strategy %s: episodes start as its decisions are taken (up to %d "
                   "sample(s) per task and model)\n",
                   std::string(config::to_string(cfg.strategy.kind)).c_str(),
                   config::max_samples_per_task_model(cfg));
    }
  };
  auto result = agent::run_campaign_wired(cfg, store, opts, hooks);
  if (show_progress && tty) std::fprintf(stderr, "\n");
  store.close();
  if (!result) return report_failure(verb, result.error());
  auto& p = result->progress;
  switch (result->status) {
    case agent::RunStatus::completed:
      std::fprintf(stderr,
                   "korch: campaign '%s' complete: %lld episodes, %lld turns, %lld tokens, $%.4f\n",
                   cfg.name.c_str(), static_cast<long long>(p.episodes),
                   static_cast<long long>(p.turns), static_cast<long long>(p.tokens), p.cost_usd);
      return k_exit_ok;
    case agent::RunStatus::stopped:
      std::fprintf(
          stderr,
          "korch: interrupted; %lld/%lld episodes final. Run the same command again to resume.\n",
          static_cast<long long>(p.final), static_cast<long long>(p.episodes));
      return exit_code(ErrorKind::interrupted);
    case agent::RunStatus::aborted:
      return report_failure(verb, ErrorKind::unavailable,
                            fmt::format("aborted: {} (the store is resumable)", result->message));
  }
  return exit_code(ErrorKind::failure);
}

}  // namespace korch::cli
