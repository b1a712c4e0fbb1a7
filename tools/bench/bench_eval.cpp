// korch-bench-eval: measures the protected evaluator (DESIGN §5) end to end.
//
//   korch-bench-eval --task FILE [--task FILE ...] --code FILE [--mode check|submit]
//                    [--device cpu|cuda] [--repeat N] [--cache DIR] [--fresh]
//                    [--rules off] [--workers N] [--print]
//
// Runs the same evaluation N times per task, one after another, through the
// real evaluator, and prints per-run wall time, verdict, speedup with its 95%
// interval and the harness overhead per call on each side, then per task the
// median/min/max/sd of the speedups and how many intervals contain 1.0 (an
// equal-work candidate — a load_inline function calling the reference's own
// op — must measure 1.00 with intervals that contain 1). --fresh execs a new
// worker process per job instead of forking the warm zygote
// (KORCH_EVAL_FRESH_PROCESS=1), for the overhead comparison.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "config/tasks.hpp"
#include <nlohmann/json.hpp>

#include "evaluator/cpu_evaluator.hpp"
#include "util/fs.hpp"

using namespace korch;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void summary(const char* what, const std::vector<double>& v) {
  if (v.empty()) return;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  double sd = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0;
  std::printf("%-22s n=%zu median=%.4f min=%.4f max=%.4f mean=%.4f sd=%.4f\n", what, v.size(),
              median(v), *std::min_element(v.begin(), v.end()),
              *std::max_element(v.begin(), v.end()), mean, sd);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> task_paths;
  std::string code_path, mode = "check", cache = "korch-bench-cache", device = "cpu";
  int repeat = 5, workers = 1;
  bool fresh = false, rules = true, print = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--task") task_paths.push_back(next());
    else if (a == "--device") device = next();
    else if (a == "--code") code_path = next();
    else if (a == "--mode") mode = next();
    else if (a == "--repeat") repeat = std::atoi(next().c_str());
    else if (a == "--cache") cache = next();
    else if (a == "--workers") workers = std::atoi(next().c_str());
    else if (a == "--fresh") fresh = true;
    else if (a == "--rules") rules = next() != "off";
    else if (a == "--print") print = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (task_paths.empty() || code_path.empty()) {
    std::fprintf(stderr, "usage: korch-bench-eval --task FILE [--task FILE ...] --code FILE "
                         "[--mode check|submit] [--device cpu|cuda] [--repeat N] [--cache DIR] "
                         "[--fresh] [--rules off] [--print]\n");
    return 2;
  }
  if (fresh) setenv("KORCH_EVAL_FRESH_PROCESS", "1", 1);
  auto code = read_file(code_path);
  if (!code) {
    std::fprintf(stderr, "cannot read %s\n", code_path.c_str());
    return 1;
  }
  config::EvaluatorConfig cfg;
  cfg.mode = device == "cuda" ? config::EvalMode::gpu : config::EvalMode::cpu;
  cfg.workers = workers;
  cfg.timeout_s = 300;
  const auto s0 = std::chrono::steady_clock::now();
  auto ev = evaluator::make_cpu_evaluator(cfg, cache);
  if (!ev) {
    std::fprintf(stderr, "evaluator: %s\n", ev.error().message.c_str());
    return 1;
  }
  const double start_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  std::printf("evaluator start (zygote exec + import torch%s): %.3f s%s\n",
              device == "cuda" ? " + GPU facts job" : "", start_s,
              fresh ? " [fresh process per job]" : "");
  for (const auto& task_path : task_paths) {
    auto task = config::load_task_file(task_path);
    if (!task) {
      std::fprintf(stderr, "cannot read %s: %s\n", task_path.c_str(), task.error().message.c_str());
      return 1;
    }
    std::printf("== %s (%s, %s)\n", task->name.c_str(), mode.c_str(), device.c_str());
    std::vector<double> walls, speedups, ov_ref, ov_cand;
    int contains_one = 0;
    for (int i = 0; i < repeat; ++i) {
      evaluator::Request req;
      req.request_id = "bench-" + std::to_string(i);
      req.mode = evaluator::mode_from_string(mode).value_or(evaluator::Mode::check);
      req.task = *task;
      req.code = *code;
      req.secret_seed = 1000 + static_cast<std::uint64_t>(i);
      req.rules = rules;
      std::promise<evaluator::Report> p;
      auto f = p.get_future();
      (*ev)->evaluate(req, [&](evaluator::Report r) { p.set_value(std::move(r)); });
      evaluator::Report r = f.get();
      walls.push_back(r.wall_s);
      std::printf("run %d: %s wall=%.3fs", i, evaluator::to_string(r.status), r.wall_s);
      if (r.speedup) {
        speedups.push_back(*r.speedup);
        const double lo = r.speedup_ci_low.value_or(0), hi = r.speedup_ci_high.value_or(0);
        contains_one += lo <= 1.0 && hi >= 1.0;
        std::printf(" speedup=%.3f [%.3f, %.3f] ref=%.4fms cand=%.4fms", *r.speedup, lo, hi,
                    r.ref_time_ms.value_or(0), r.cand_time_ms.value_or(0));
      }
      auto evj = nlohmann::json::parse(r.evidence_json.empty() ? "{}" : r.evidence_json, nullptr, false);
      if (!evj.is_discarded()) {
        auto t = evj.value("measure", nlohmann::json::object()).value("timing", nlohmann::json::object());
        auto ov = t.value("harness_overhead_us", nlohmann::json::object());
        if (ov.contains("ref") && ov.contains("cand")) {
          ov_ref.push_back(ov["ref"].get<double>());
          ov_cand.push_back(ov["cand"].get<double>());
          std::printf(" overhead_us ref=%.1f cand=%.1f blocks=%d", ov_ref.back(), ov_cand.back(),
                      t.value("blocks", 0));
        }
      }
      if (!r.error.empty()) std::printf(" error=%s", r.error.substr(0, 200).c_str());
      std::printf("\n");
      if (print) std::printf("%s\n", r.to_json().c_str());
      std::fflush(stdout);
    }
    summary("wall_s", walls);
    summary("speedup", speedups);
    summary("overhead_us ref", ov_ref);
    summary("overhead_us cand", ov_cand);
    if (!speedups.empty())
      std::printf("intervals containing 1.0: %d of %zu\n", contains_one, speedups.size());
  }
  (*ev)->shutdown();
  return 0;
}
