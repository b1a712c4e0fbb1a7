// korch-bench-strategies: grid against refine at the same spend, in one run
// (issue #37, "Must show"). Both campaigns run in-process against the fake
// OpenAI-compatible server with the "refine" script (tests/support: a reply
// given a seed kernel runs at 1.2x the seed; without one, 35% fail and the
// rest run at 0.60x-1.19x) and the mock evaluator, which reads the speedup
// the reply wrote (its MOCK_SPEEDUP marker, evaluator/mock_evaluator.hpp). No model and no
// kernel is real: what this measures is the strategy, not a model.
//
//   korch-bench-strategies [--kernelbench DIR] [--level N] [--ids RANGE] [--samples N]
//                          [--keep DIR] [--json]
//
// grid:   samples_per_task = N, every episode independent.
// refine: strategy.rounds = N, samples_per_task = 1: the same number of
//         episodes (and, with the script's fixed usage, the same spend).
// Prints each campaign's per-task fast_p (best kernel per task), spend,
// episodes, and fast_1 after each round; --json prints one JSON object.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/campaign_runner.hpp"
#include "config/loader.hpp"
#include "evaluator/evaluator.hpp"
#include "reports/report.hpp"
#include "store/store.hpp"
#include "tests/support/fake_openai_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;
using namespace korch;

namespace {

struct Options {
  std::string kernelbench = KORCH_SOURCE_DIR "/../shared/kernelbench";
  int level = 1;
  std::string ids = "1-100";
  int samples = 3;
  std::string keep;
  bool json = false;
};

struct Outcome {
  std::string name;
  reports::CampaignReport report;
  double fast1 = 0, fast0 = 0, cost = 0;
  std::int64_t episodes = 0;
};

double fast_at(const reports::CurvePoint& p, double t) {
  for (auto& [x, v] : p.fast_p)
    if (x == t) return v;
  return 0;
}

int run(const Options& o) {
  testing::FakeServerOptions so;
  so.reply_with_id = [](const std::string& model, const std::vector<llm::Message>& messages,
                        const std::string& id) {
    return testing::refine_script_reply(model, messages, id);
  };
  testing::FakeOpenAIServer server(so);
  if (auto r = server.start(); !r) {
    std::fprintf(stderr, "fake server: %s\n", r.error().message.c_str());
    return 1;
  }
  fs::path dir = o.keep.empty() ? fs::temp_directory_path() /
                                      fmt::format("korch-bench-strategies-{}", ::getpid())
                                : fs::path(o.keep);
  fs::create_directories(dir);
  const auto db = (dir / "strategies.db").string();
  fs::remove(db);

  auto make_cfg = [&](const std::string& name, config::StrategyKind kind) {
    config::CampaignConfig cfg;
    cfg.name = name;
    cfg.db_path = db;
    if (fs::exists(fs::path(o.kernelbench) / fmt::format("level{}", o.level))) {
      cfg.tasks.kernelbench_dir = o.kernelbench;
      cfg.tasks.levels = {o.level};
      cfg.tasks.ids = o.ids;
    } else {
      cfg.tasks.kernelbench_dir = KORCH_SOURCE_DIR "/examples/tasks";
    }
    cfg.max_turns = 2;
    cfg.max_inflight_episodes = 16;
    cfg.synchronous = config::Synchronous::normal;
    cfg.evaluator.mode = config::EvalMode::mock;
    cfg.strategy.kind = kind;
    if (kind == config::StrategyKind::refine) {
      cfg.samples_per_task = 1;
      cfg.strategy.rounds = o.samples;
    } else {
      cfg.samples_per_task = o.samples;
    }
    config::ModelConfig m;
    m.id = "fake";
    m.base_url = server.base_url();
    m.model = "fake-refine";
    m.price_prompt_per_mtok = 1.0;
    m.price_completion_per_mtok = 2.0;
    cfg.models.push_back(m);
    return cfg;
  };

  store::Options sto;
  sto.path = db;
  sto.synchronous = "NORMAL";
  auto st = store::Store::open(sto);
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 1;
  }
  std::vector<Outcome> outcomes;
  for (auto kind : {config::StrategyKind::grid, config::StrategyKind::refine}) {
    auto cfg = make_cfg(fmt::format("bench-{}", config::to_string(kind)), kind);
    if (auto v = config::validate(cfg); !v) {
      std::fprintf(stderr, "%s\n", v.error().message.c_str());
      return 1;
    }
    auto made = evaluator::make_evaluator(cfg.evaluator, "");
    if (!made) {
      std::fprintf(stderr, "%s\n", made.error().message.c_str());
      return 1;
    }
    auto& ev = *made;
    auto plan = agent::plan_campaign(cfg, *ev);
    if (!plan) {
      std::fprintf(stderr, "%s\n", plan.error().message.c_str());
      return 1;
    }
    auto client = llm::make_curl_client();
    for (auto& m : cfg.models) (void)client->add_model(m);
    std::atomic<bool> stop{false};
    agent::RunOptions ro;
    ro.owner = fmt::format("bench:{}:x", ::getpid());
    ro.stop = &stop;
    auto r = agent::run_campaign(cfg, *plan, **st, *client, *ev, ro);
    ev->shutdown();
    if (!r || r->status != agent::RunStatus::completed) {
      std::fprintf(stderr, "campaign %s: %s\n", cfg.name.c_str(),
                   r ? r->message.c_str() : r.error().message.c_str());
      return 1;
    }
    auto rep = reports::build_report(**st, plan->campaign_id);
    if (!rep) {
      std::fprintf(stderr, "%s\n", rep.error().message.c_str());
      return 1;
    }
    Outcome out;
    out.name = std::string(config::to_string(kind));
    out.report = std::move(*rep);
    const auto& last = out.report.strategy.by_round.back();
    out.fast1 = fast_at(last, 1);
    out.fast0 = fast_at(last, 0);
    out.cost = last.cost_usd;
    out.episodes = last.episodes;
    outcomes.push_back(std::move(out));
  }
  server.stop();
  (*st)->close();

  const auto tasks = outcomes.front().report.tasks.size();
  if (o.json) {
    nlohmann::json j;
    j["tasks"] = tasks;
    j["samples_per_task"] = o.samples;
    for (auto& out : outcomes) {
      nlohmann::json rounds = nlohmann::json::array();
      for (auto& p : out.report.strategy.by_round)
        rounds.push_back({{"round", p.round},
                          {"episodes", p.episodes},
                          {"cost_usd", p.cost_usd},
                          {"fast_1", fast_at(p, 1)}});
      j[out.name] = {{"fast_1", out.fast1},
                     {"fast_0", out.fast0},
                     {"cost_usd", out.cost},
                     {"episodes", out.episodes},
                     {"rounds", rounds}};
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("grid vs refine: %zu tasks, %d episodes per task each, fake LLM (refine script)\n",
                tasks, o.samples);
    std::printf("%-8s %9s %10s %8s %8s  fast_1 after each round\n", "strategy", "episodes", "spend",
                "fast_0", "fast_1");
    for (auto& out : outcomes) {
      std::string per_round;
      for (auto& p : out.report.strategy.by_round)
        per_round += fmt::format(" r{}={:.3f}", p.round, fast_at(p, 1));
      std::printf("%-8s %9lld %10.4f %8.3f %8.3f %s\n", out.name.c_str(),
                  static_cast<long long>(out.episodes), out.cost, out.fast0, out.fast1,
                  per_round.c_str());
    }
  }
  if (o.keep.empty()) fs::remove_all(dir);
  // The claim this benchmark exists to show; a failure is an exit status.
  if (outcomes[1].fast1 <= outcomes[0].fast1 ||
      std::abs(outcomes[1].cost - outcomes[0].cost) > 1e-9 * std::max(1.0, outcomes[0].cost)) {
    std::fprintf(stderr, "refine did not beat grid at the same spend\n");
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto arg = std::string(argv[i]);
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--kernelbench")
      o.kernelbench = value();
    else if (arg == "--level")
      o.level = std::stoi(value());
    else if (arg == "--ids")
      o.ids = value();
    else if (arg == "--samples")
      o.samples = std::stoi(value());
    else if (arg == "--keep")
      o.keep = value();
    else if (arg == "--json")
      o.json = true;
    else {
      std::fprintf(stderr,
                   "usage: korch-bench-strategies [--kernelbench DIR] [--level N] [--ids RANGE] "
                   "[--samples N] [--keep DIR] [--json]\n");
      return 2;
    }
  }
  log::set_level("warn");
  return run(o);
}
