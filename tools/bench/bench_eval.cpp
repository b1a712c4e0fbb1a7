// korch-bench-eval: measures the cpu evaluator (DESIGN §5) end to end.
//
//   korch-bench-eval --task FILE --code FILE [--mode check|submit] [--repeat N]
//                    [--cache DIR] [--fresh] [--rules off] [--workers N] [--print]
//
// Runs the same evaluation N times, one after another, through the real
// make_cpu_evaluator, and prints per-run wall time, verdict and speedup, then
// the median/min/max. --fresh execs a new worker process per job instead of
// forking the warm zygote (KORCH_EVAL_FRESH_PROCESS=1), for the overhead
// comparison.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "config/tasks.hpp"
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
  std::string task_path, code_path, mode = "check", cache = "korch-bench-cache";
  int repeat = 5, workers = 1;
  bool fresh = false, rules = true, print = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--task") task_path = next();
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
  if (task_path.empty() || code_path.empty()) {
    std::fprintf(stderr, "usage: korch-bench-eval --task FILE --code FILE [--mode check|submit] "
                         "[--repeat N] [--cache DIR] [--fresh] [--rules off] [--print]\n");
    return 2;
  }
  if (fresh) setenv("KORCH_EVAL_FRESH_PROCESS", "1", 1);
  auto task = config::load_task_file(task_path);
  auto code = read_file(code_path);
  if (!task || !code) {
    std::fprintf(stderr, "cannot read the task or the code\n");
    return 1;
  }
  config::EvaluatorConfig cfg;
  cfg.mode = "cpu";
  cfg.workers = workers;
  cfg.timeout_s = 120;
  const auto s0 = std::chrono::steady_clock::now();
  auto ev = evaluator::make_cpu_evaluator(cfg, cache);
  if (!ev) {
    std::fprintf(stderr, "evaluator: %s\n", ev.error().message.c_str());
    return 1;
  }
  const double start_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  std::printf("evaluator start (zygote exec + import torch): %.3f s%s\n", start_s,
              fresh ? " [fresh process per job]" : "");
  std::vector<double> walls, speedups;
  for (int i = 0; i < repeat; ++i) {
    evaluator::Request req;
    req.request_id = "bench-" + std::to_string(i);
    req.mode = mode == "submit" ? evaluator::Mode::submit : evaluator::Mode::check;
    req.task = *task;
    req.code = *code;
    req.secret_seed = 1000 + static_cast<std::uint64_t>(i);
    req.rules = rules;
    std::promise<evaluator::Report> p;
    auto f = p.get_future();
    (*ev)->evaluate(req, [&](evaluator::Report r) { p.set_value(std::move(r)); });
    evaluator::Report r = f.get();
    walls.push_back(r.wall_s);
    if (r.speedup) speedups.push_back(*r.speedup);
    std::printf("run %d: %s wall=%.3fs", i, evaluator::to_string(r.status), r.wall_s);
    if (r.speedup)
      std::printf(" speedup=%.3f [%.3f, %.3f] ref=%.4fms cand=%.4fms", *r.speedup,
                  r.speedup_ci_low.value_or(0), r.speedup_ci_high.value_or(0),
                  r.ref_time_ms.value_or(0), r.cand_time_ms.value_or(0));
    if (!r.error.empty()) std::printf(" error=%s", r.error.substr(0, 200).c_str());
    std::printf("\n");
    if (print) std::printf("%s\n", r.to_json().c_str());
  }
  summary("wall_s", walls);
  summary("speedup", speedups);
  (*ev)->shutdown();
  return 0;
}
