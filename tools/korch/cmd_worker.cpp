// `korch worker --store postgres://... [--config CAMPAIGN.toml] [--evaluator mock|cpu|gpu]
//  [--gpus all|none|LIST] [--compile-jobs N] [--slots N] [--lease-s S] [--id NAME]
//  [--cache-dir DIR] [--mock-latency-s S] [--max-claims N] [--max-evaluations N] [--drain-s S]
//  [--set KEY=VALUE]...`
// Claims evaluations from the store's work queue and runs them on this host
// (evaluator/remote/eval_worker.hpp, docs/cluster.md). SIGTERM or SIGINT drains: the
// claimed evaluations finish and are written, no new one is taken; a second
// signal exits at once (the leases expire and other workers re-run them).
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "config/gpus.hpp"
#include "config/loader.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/remote/eval_worker.hpp"
#include "evaluator/remote/queue_evaluator.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "tools/korch/cli.hpp"
#include "tools/korch/common.hpp"
#include "tools/korch/version.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::cli {
namespace remote = evaluator::remote;
namespace {

constexpr const char* k_verb = "worker";

std::atomic<bool> g_worker_stop{false};
std::atomic<int> g_worker_signals{0};

extern "C" void on_worker_signal(int) {
  g_worker_stop.store(true);
  if (g_worker_signals.fetch_add(1) >= 1) _exit(exit_code(ErrorKind::interrupted));
}

// The GPUs this process may use, without a driver call (the evaluator asks
// the device itself, in a sandboxed job): the entries of CUDA_VISIBLE_DEVICES
// when it is set (Slurm's --gres and Kubernetes' device plugin set it; the
// evaluator numbers GPUs as positions in it), else the /dev/nvidiaN nodes.
int count_gpu_nodes() {
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
    int n = 0;
    std::string item;
    std::stringstream ss(cvd);
    while (std::getline(ss, item, ','))
      if (!item.empty()) ++n;
    return n;
  }
  int n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    auto name = e.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++n;
  }
  return n;
}

// The GPU model verdicts are measured on ("NVIDIA H100 80GB HBM3"), for the
// queue version (remote::queue_version): in gpu mode the evaluator's device
// description begins with the name the device reports, then
// " (compute capability"; "" in the other modes (their timings name no GPU).
std::string gpu_model(const evaluator::Evaluator& evaluator) {
  if (evaluator.mode() != config::EvalMode::gpu) return {};
  std::string text = evaluator.device_description();
  auto end = text.find(" (compute capability");
  return end == std::string::npos ? text.substr(0, text.find(" (")) : text.substr(0, end);
}

}  // namespace

int cmd_worker(const Args& args) {
  if (!args.positional.empty())
    return report_failure(k_verb, ErrorKind::invalid, "takes no positional arguments");
  // First: a SIGTERM while the worker starts (Slurm, Kubernetes) is a drain
  // too: it registers, takes nothing and stops cleanly.
  struct sigaction sa {};
  sa.sa_handler = on_worker_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // The same layers as korch run: defaults < --config file < KORCH_* < --set
  // (without --config: defaults < KORCH_* < --set).
  auto file = args.get("--config");
  auto loaded = file
                    ? config::load_campaign(*file, config::process_environment(), args.all("--set"))
                    : config::load_settings(config::process_environment(), args.all("--set"));
  if (!loaded) return report_failure(k_verb, with_kind(loaded.error(), ErrorKind::invalid));
  config::CampaignConfig cfg = loaded->config;
  for (const auto& w : loaded->warnings)
    std::fprintf(stderr, "korch worker: warning: %s\n", w.c_str());
  log::init(args.get("--log-level").value_or(std::string(to_string(cfg.log_level))));
  ::prctl(PR_SET_DUMPABLE, 0);
  // --db, as every command names its store (--store is its older spelling).
  if (args.has("--db") && args.has("--store"))
    return report_failure(k_verb, ErrorKind::invalid, "give the store once: --db or --store");
  std::string store_url = args.get("--db").value_or(args.get("--store").value_or(cfg.db_path));
  if (!store::is_postgres_url(store_url)) {
    return report_failure(k_verb, ErrorKind::invalid,
                          "--db must name the PostgreSQL store of the coordinator "
                          "(postgres://...; or store.url in --config, or KORCH_STORE_URL), not '" +
                              store::redact_url(store_url) + "'");
  }
  auto& ecfg = cfg.evaluator;
  ecfg.remote = false;  // this process is where the evaluations run
  if (auto mode = args.get("--evaluator")) {
    auto m = enum_from_name<config::EvalMode>(*mode);
    if (!m) {
      return report_failure(k_verb, ErrorKind::invalid,
                            "--evaluator must be mock, cpu or gpu (got '" + *mode + "')");
    }
    ecfg.mode = *m;
  }
  auto compile_jobs = get_number<std::int64_t>(args, "--compile-jobs");
  auto slots_flag = get_number<std::int64_t>(args, "--slots");
  auto lease = get_number<double>(args, "--lease-s");
  auto latency = get_number<double>(args, "--mock-latency-s");
  auto max_evals = get_number<std::int64_t>(args, "--max-evaluations");
  auto max_claims = get_number<std::int64_t>(args, "--max-claims");
  auto drain = get_number<double>(args, "--drain-s");
  if (!drain) return report_failure(k_verb, drain.error());
  if (!max_claims) return report_failure(k_verb, max_claims.error());
  for (const auto* r : {&compile_jobs, &slots_flag}) {
    if (!*r) return report_failure(k_verb, r->error());
  }
  if (!lease) return report_failure(k_verb, lease.error());
  if (!latency) return report_failure(k_verb, latency.error());
  if (!max_evals) return report_failure(k_verb, max_evals.error());
  if (*compile_jobs) ecfg.compile_jobs = static_cast<int>(**compile_jobs);
  if (*latency) ecfg.mock_latency_s = **latency;

  // --gpus: "none" (no GPU; cpu or mock evaluator), "all" or indices (gpu mode).
  std::string gpus =
      args.get("--gpus").value_or(ecfg.mode == config::EvalMode::gpu ? ecfg.gpus : "none");
  int slots = ecfg.mode == config::EvalMode::cpu ? ecfg.workers : 1;
  if (gpus != "none") {
    if (ecfg.mode != config::EvalMode::gpu) {
      return report_failure(k_verb, ErrorKind::invalid,
                            "--gpus " + gpus + " needs the gpu evaluator (--evaluator gpu)");
    }
    const int nodes = count_gpu_nodes();
    auto list = config::parse_gpu_list(gpus, nodes > 0 ? std::optional<int>(nodes) : std::nullopt);
    if (!list) return report_failure(k_verb, ErrorKind::invalid, "--gpus: " + list.error().message);
    ecfg.gpus = gpus;
    slots = std::max<int>(1, static_cast<int>(list->size()));  // one evaluation per GPU
  } else if (ecfg.mode == config::EvalMode::gpu) {
    return report_failure(k_verb, ErrorKind::invalid,
                          "the gpu evaluator needs GPUs (--gpus all or indices), not --gpus none");
  }
  if (*slots_flag) slots = static_cast<int>(**slots_flag);
  if (slots < 1) return report_failure(k_verb, ErrorKind::invalid, "--slots must be at least 1");

  std::string cache_dir =
      args.get("--cache-dir")
          .value_or(ecfg.cache_dir.empty() ? std::string("korch-cache") : ecfg.cache_dir);
  auto ev = evaluator::make_evaluator(ecfg, cache_dir);
  if (!ev) return report_failure(k_verb, ev.error(), "evaluator: ");
  auto& evaluator = **ev;

  remote::WorkerOptions options;
  options.store_url = store_url;
  options.worker_id = args.get("--id").value_or("");
  options.gpus = gpus == "all" ? fmt::format("all ({})", slots) : gpus;
  options.slots = slots;
  if (*lease) options.lease_s = **lease;
  if (options.lease_s <= 0)
    return report_failure(k_verb, ErrorKind::invalid, "--lease-s must be more than 0");
  // An expired lease sends no NOTIFY: idle slots look for one at least twice per lease.
  options.idle_poll_s = std::min(options.idle_poll_s, options.lease_s / 2);
  options.queue_version = remote::queue_version(ecfg, evaluator.version(), gpu_model(evaluator));
  options.korch_version = k_version;
  if (*max_evals) options.max_evaluations = **max_evals;
  if (*max_claims) options.max_claims = **max_claims;
  if (*drain) options.drain_s = **drain;

  auto summary = remote::run_worker(options, evaluator, g_worker_stop);
  evaluator.shutdown();
  if (!summary) return report_failure(k_verb, summary.error());
  std::fprintf(stderr, "korch worker: %lld evaluation(s) done, %lld refused, %lld handed back\n",
               static_cast<long long>(summary->done), static_cast<long long>(summary->refused),
               static_cast<long long>(summary->released));
  return k_exit_ok;  // a drained worker ended cleanly: nothing of its work is lost
}

}  // namespace korch::cli

namespace korch::cli {

void print_fleet(const Args& args, const std::vector<std::string>& campaign_ids) {
  std::string location;
  if (auto db = args.get("--db")) {
    location = *db;
  } else if (args.positional.size() == 1) {
    auto loaded =
        config::load_campaign(args.positional[0], config::process_environment(), args.all("--set"));
    if (loaded) location = loaded->config.db_path;
  }
  if (!store::is_postgres_url(location)) return;
  auto q = store::WorkQueue::open(location, false);
  if (!q) return;
  for (const auto& id : campaign_ids) {
    auto c = (*q)->counts(id);
    if (!c || c->queued + c->claimed + c->done == 0) continue;
    std::printf("campaign %s: evaluation queue %lld queued, %lld claimed, %lld done\n", id.c_str(),
                static_cast<long long>(c->queued), static_cast<long long>(c->claimed),
                static_cast<long long>(c->done));
  }
  auto workers = (*q)->list_workers();
  if (!workers || workers->empty()) return;
  const double now = now_unix();
  std::printf("workers %zu:\n", workers->size());
  for (const auto& w : *workers) {
    std::printf(
        "  %s  host %s  gpus %s  slots %lld  %s  korch %s  heartbeat %.0f s ago  done %lld\n",
        w.id.c_str(), w.host.c_str(), w.gpus.c_str(), static_cast<long long>(w.slots),
        w.state.c_str(), w.korch_version.c_str(), std::max(0.0, now - w.heartbeat_at),
        static_cast<long long>(w.evaluations_done));
    std::printf("    evaluator '%s'\n", w.evaluator_version.c_str());
    if (!w.note.empty()) std::printf("    note: %s\n", w.note.c_str());
  }
}

}  // namespace korch::cli
