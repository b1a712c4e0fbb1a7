// korch-bench-eval: measures the protected evaluator (DESIGN §5) end to end.
//
//   korch-bench-eval --task FILE [--task FILE ...] --code FILE [--mode check|submit]
//                    [--device cpu|cuda] [--gpus all|0,1] [--repeat N] [--cache DIR]
//                    [--fresh] [--rules off] [--workers N] [--print]
//                    [--do-bench [--python PY]]
//                    [--throughput N [--baseline M]]
//
// Repeat mode (the default): runs the same evaluation N times per task, one
// after another, through the real evaluator, and prints per run the wall
// time, verdict, speedup with its 95% interval, the harness overhead per call
// on each side, the time the GPU was leased and the evaluation's overhead
// (its wall time less the judge's correctness and timing work: process
// starts, imports, CUDA contexts, IPC); then per task the median/min/max/sd
// and CV of the speedups and candidate times and how many intervals contain
// 1.0 (an equal-work candidate — a load_inline function calling the
// reference's own op — must measure 1.00 with intervals that contain 1).
// --fresh execs a new worker process per job instead of forking the warm
// zygote (KORCH_EVAL_FRESH_PROCESS=1), for the overhead comparison.
// --do-bench: afterwards, tools/bench/do_bench.py times the same reference
// and candidate with triton.testing.do_bench (cold L2, twice) and the
// medians are printed side by side with korch's.
//
// Throughput mode (--throughput N, gpu): N evaluations submitted at once,
// each a new load_inline source (the code's KORCH_VARIANT replaced by a
// fresh tag, so every one is a compile-cache miss), the first task only.
// Prints evaluations per hour, each GPU's busy fraction (time leased / wall)
// and the stage medians. --baseline M then runs M more the way harnesses
// that compile inside the evaluation do: the GPU lease taken before the
// compile (KORCH_EVAL_COMPILE_UNDER_LEASE=1), side by side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "config/tasks.hpp"

#include "evaluator/protected_evaluator.hpp"
#include "util/fs.hpp"

using namespace korch;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

using json = nlohmann::json;

json evidence_of(const evaluator::Report& r) {
  return r.evidence.is_object() ? r.evidence : json::object();
}

// Seconds of the judge's own work: from its runners being ready to its last
// phase (correctness, families, ablation, timing, the check after timing).
double judge_work_s(const json& ev) {
  const json phases = ev.value("measure", json::object()).value("phases", json::array());
  double ready = -1, last = -1;
  for (auto& p : phases) {
    if (!p.is_array() || p.size() != 2) continue;
    if (p[0] == "runners_ready") ready = p[1].get<double>();
    last = p[1].get<double>();
  }
  return ready >= 0 && last >= ready ? last - ready : 0;
}

double stage(const json& ev, const char* name) {
  return ev.value("stages", json::object()).value(name, 0.0);
}

void summary(const char* what, const std::vector<double>& v) {
  if (v.empty()) return;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  double sd = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0;
  std::printf("%-22s n=%zu median=%.4f min=%.4f max=%.4f mean=%.4f sd=%.4f cv=%.2f%%\n", what,
              v.size(), median(v), *std::min_element(v.begin(), v.end()),
              *std::max_element(v.begin(), v.end()), mean, sd, mean != 0 ? 100 * sd / mean : 0.0);
}

evaluator::Report evaluate_sync(evaluator::Evaluator& ev, evaluator::Request req) {
  std::promise<evaluator::Report> p;
  auto f = p.get_future();
  ev.evaluate(std::move(req), [&](evaluator::Report r) { p.set_value(std::move(r)); });
  return f.get();
}

// Where one evaluation's time went: its stages (seconds) and the judge's
// phases (seconds from the judge's start to the end of each phase).
void print_profile(const json& evidence, const char* which) {
  // (Named copies: a range-for over .items() of a temporary dangles.)
  const json stages = evidence.value("stages", json::object());
  const json phases = evidence.value("measure", json::object()).value("phases", json::array());
  std::printf("stages (%s):", which);
  for (auto& [k, v] : stages.items())
    if (v.is_number()) std::printf(" %s=%.3f", k.c_str(), v.get<double>());
  std::printf(" measure_job=%.3f\njudge phases (%s):", evidence.value("measure_wall_s", 0.0),
              which);
  for (auto& p : phases)
    if (p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_number())
      std::printf(" %s@%.3f", p[0].get<std::string>().c_str(), p[1].get<double>());
  std::printf("\n");
}

// N evaluations at once, each a new load_inline source. Returns evals/hour.
double throughput(const config::EvaluatorConfig& cfg, const std::string& cache,
                  const config::Task& task, const std::string& code_template, int n,
                  evaluator::Mode mode, const char* label) {
  auto ev = evaluator::make_protected_evaluator(cfg, cache);
  if (!ev) {
    std::fprintf(stderr, "evaluator: %s\n", ev.error().message.c_str());
    return 0;
  }
  const std::string tag =
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  std::vector<std::promise<evaluator::Report>> ps(static_cast<std::size_t>(n));
  std::vector<std::future<evaluator::Report>> fs;
  // Seconds from the first submission to each request's result (each
  // callback writes its own slot before its promise is set).
  std::vector<double> done_of(static_cast<std::size_t>(n));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    evaluator::Request req;
    req.request_id = std::string(label) + "-" + std::to_string(i);
    req.mode = mode;
    req.task = task;
    req.code = code_template;
    for (std::size_t at; (at = req.code.find("KORCH_VARIANT")) != std::string::npos;)
      req.code.replace(at, 13, tag + "-" + std::to_string(i));
    req.secret_seed = 7000 + static_cast<std::uint64_t>(i);
    fs.push_back(ps[static_cast<std::size_t>(i)].get_future());
    auto* p = &ps[static_cast<std::size_t>(i)];
    (*ev)->evaluate(req, [p, i, t0, &done_of](evaluator::Report r) {
      done_of[static_cast<std::size_t>(i)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      p->set_value(std::move(r));
    });
  }
  std::map<std::string, int> verdicts;
  std::map<int, double> lease_by_gpu;
  std::map<int, int> evals_by_gpu;
  std::vector<double> compile_s, lease_s, wait_s, wall_s, overhead_s;
  int misses = 0;
  json last_evidence;
  std::vector<double> lease_of;
  for (auto& f : fs) {
    evaluator::Report r = f.get();
    verdicts[evaluator::to_string(r.status)]++;
    json e = evidence_of(r);
    for (auto& c : e.value("compile", json::array()))
      if (!c.value("hit", true) && !c.value("probe", false)) ++misses;
    const int gpu = e.value("gpu", -1);
    lease_by_gpu[gpu] += stage(e, "lease_s");
    evals_by_gpu[gpu]++;
    compile_s.push_back(stage(e, "compile_s"));
    lease_s.push_back(stage(e, "lease_s"));
    wait_s.push_back(stage(e, "lease_wait_s"));
    wall_s.push_back(r.wall_s);
    overhead_s.push_back(stage(e, "lease_s") - judge_work_s(e));
    lease_of.push_back(stage(e, "lease_s"));
    last_evidence = e;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (*ev)->shutdown();
  const double per_h = n / wall * 3600;
  std::printf(
      "== throughput %s: %d evaluations (%s, every one a new load_inline source) in %.1f s: "
      "%.0f evaluations/hour; compile-cache misses %d\n",
      label, n, evaluator::to_string(mode), wall, per_h, misses);
  for (auto& [gpu, s] : lease_by_gpu)
    std::printf(
        "   GPU %d: %d evaluations, busy %.1f%% (leased %.1f s of %.1f s), %.0f evaluations/hour\n",
        gpu, evals_by_gpu[gpu], 100 * s / wall, s, wall, evals_by_gpu[gpu] / wall * 3600);
  // Steady state: after the pipeline filled (the first result), how fast
  // results come (the compile latency of the first candidates excluded).
  std::vector<double> done_at = done_of;  // in completion order
  std::sort(done_at.begin(), done_at.end());
  if (done_at.size() >= 3) {
    const double span = done_at.back() - done_at.front();
    // The GPUs' busy share of that window: the leases of every evaluation
    // but the first to finish (whose lease ended as the window opened).
    double leased = 0;
    for (std::size_t i = 0; i < lease_of.size(); ++i)
      if (done_of[i] > done_at.front()) leased += lease_of[i];
    const double n_gpus = std::max<double>(1, static_cast<double>(lease_by_gpu.size()));
    std::printf(
        "   first result after %.1f s; steady state %.0f evaluations/hour (%zu results in the "
        "last %.1f s), GPU busy %.1f%% of that window\n",
        done_at.front(), (done_at.size() - 1) / span * 3600, done_at.size() - 1, span,
        100 * std::min(leased, span * n_gpus) / (span * n_gpus));
  }
  std::printf("   verdicts:");
  for (auto& [v, c] : verdicts) std::printf(" %s=%d", v.c_str(), c);
  std::printf("\n");
  summary("   compile_s", compile_s);
  summary("   lease_s", lease_s);
  summary("   lease_wait_s", wait_s);
  summary("   lease overhead_s", overhead_s);
  summary("   eval wall_s", wall_s);
  print_profile(last_evidence, "last evaluation");
  std::fflush(stdout);
  return per_h;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if the run is killed
  std::vector<std::string> task_paths;
  std::string code_path, mode = "check", cache = "korch-bench-cache", device = "cpu", gpus = "all";
  std::string python = "python3";
  int repeat = 5, workers = 1, tput = 0, baseline = 0;
  bool fresh = false, rules = true, print = false, do_bench = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--task")
      task_paths.push_back(next());
    else if (a == "--device")
      device = next();
    else if (a == "--code")
      code_path = next();
    else if (a == "--mode")
      mode = next();
    else if (a == "--repeat")
      repeat = std::atoi(next().c_str());
    else if (a == "--cache")
      cache = next();
    else if (a == "--workers")
      workers = std::atoi(next().c_str());
    else if (a == "--fresh")
      fresh = true;
    else if (a == "--rules")
      rules = next() != "off";
    else if (a == "--print")
      print = true;
    else if (a == "--gpus")
      gpus = next();
    else if (a == "--do-bench")
      do_bench = true;
    else if (a == "--python")
      python = next();
    else if (a == "--throughput")
      tput = std::atoi(next().c_str());
    else if (a == "--baseline")
      baseline = std::atoi(next().c_str());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (task_paths.empty() || code_path.empty()) {
    std::fprintf(stderr,
                 "usage: korch-bench-eval --task FILE [--task FILE ...] --code FILE "
                 "[--mode check|submit] [--device cpu|cuda] [--repeat N] [--cache DIR] "
                 "[--fresh] [--rules off] [--print] [--gpus SPEC] [--do-bench [--python PY]] "
                 "[--throughput N [--baseline M]]\n");
    return 2;
  }
  const auto eval_mode = evaluator::mode_from_string(mode);
  if (!eval_mode || (device != "cpu" && device != "cuda")) {
    std::fprintf(stderr, "--mode is check or submit, --device cpu or cuda\n");
    return 2;
  }
  const bool cuda = device == "cuda";
  if (fresh) setenv("KORCH_EVAL_FRESH_PROCESS", "1", 1);
  auto code = read_file(code_path);
  if (!code) {
    std::fprintf(stderr, "cannot read %s\n", code_path.c_str());
    return 1;
  }
  config::EvaluatorConfig cfg;
  cfg.mode = cuda ? config::EvalMode::gpu : config::EvalMode::cpu;
  cfg.workers = workers;
  cfg.timeout_s = 300;
  cfg.gpus = gpus;
  if (tput > 0 || baseline > 0) {  // --throughput 0 --baseline M: the baseline alone
    auto task = config::load_task_file(task_paths.front());
    if (!task) {
      std::fprintf(stderr, "cannot read %s: %s\n", task_paths.front().c_str(),
                   task.error().message.c_str());
      return 1;
    }
    if (code->find("KORCH_VARIANT") == std::string::npos) {
      std::fprintf(
          stderr,
          "--throughput needs a code template with KORCH_VARIANT (tools/bench/candidates/)\n");
      return 2;
    }
    // (throughput is of submissions)
    const double piped =
        tput > 0 ? throughput(cfg, cache, *task, *code, tput, evaluator::Mode::submit, "pipelined")
                 : 0;
    if (baseline > 0) {
      setenv("KORCH_EVAL_COMPILE_UNDER_LEASE", "1", 1);
      const double under = throughput(cfg, cache, *task, *code, baseline, evaluator::Mode::submit,
                                      "compile-under-lease");
      unsetenv("KORCH_EVAL_COMPILE_UNDER_LEASE");
      if (under > 0 && piped > 0)
        std::printf("pipelined / compile-under-lease: %.2fx\n", piped / under);
    }
    return 0;
  }
  const auto s0 = std::chrono::steady_clock::now();
  auto ev = evaluator::make_protected_evaluator(cfg, cache);
  if (!ev) {
    std::fprintf(stderr, "evaluator: %s\n", ev.error().message.c_str());
    return 1;
  }
  const double start_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  std::printf("evaluator start (zygote exec + import torch%s): %.3f s%s\n",
              cuda ? " + GPU facts job" : "", start_s, fresh ? " [fresh process per job]" : "");
  for (const auto& task_path : task_paths) {
    auto task = config::load_task_file(task_path);
    if (!task) {
      std::fprintf(stderr, "cannot read %s: %s\n", task_path.c_str(), task.error().message.c_str());
      return 1;
    }
    std::printf("== %s (%s, %s)\n", task->name.c_str(), mode.c_str(), device.c_str());
    std::vector<double> walls, speedups, ov_ref, ov_cand, cand_ms, ref_ms, overhead, lease;
    json last_evidence;
    int contains_one = 0;
    for (int i = 0; i < repeat; ++i) {
      evaluator::Request req;
      req.request_id = "bench-" + std::to_string(i);
      req.mode = *eval_mode;
      req.task = *task;
      req.code = *code;
      req.secret_seed = 1000 + static_cast<std::uint64_t>(i);
      req.rules = rules;
      evaluator::Report r = evaluate_sync(**ev, req);
      walls.push_back(r.wall_s);
      std::printf("run %d: %s wall=%.3fs", i, evaluator::to_string(r.status), r.wall_s);
      if (r.speedup) {
        speedups.push_back(*r.speedup);
        const double lo = r.speedup_ci_low.value_or(0), hi = r.speedup_ci_high.value_or(0);
        contains_one += lo <= 1.0 && hi >= 1.0;
        std::printf(" speedup=%.3f [%.3f, %.3f] ref=%.4fms cand=%.4fms", *r.speedup, lo, hi,
                    r.ref_time_ms.value_or(0), r.cand_time_ms.value_or(0));
        if (r.cand_time_ms) cand_ms.push_back(*r.cand_time_ms);
        if (r.ref_time_ms) ref_ms.push_back(*r.ref_time_ms);
      }
      json evj = evidence_of(r);
      last_evidence = evj;
      {
        const double work = judge_work_s(evj);
        overhead.push_back(r.wall_s - work);
        std::printf(" overhead=%.2fs", r.wall_s - work);
        if (cuda) {
          lease.push_back(stage(evj, "lease_s"));
          std::printf(" lease=%.2fs gpu=%d", lease.back(), evj.value("gpu", -1));
        }
      }
      {
        auto t = evj.value("measure", nlohmann::json::object())
                     .value("timing", nlohmann::json::object());
        auto ov = t.value("harness_overhead_us", nlohmann::json::object());
        if (ov.contains("ref") && ov.contains("cand")) {
          ov_ref.push_back(ov["ref"].get<double>());
          ov_cand.push_back(ov["cand"].get<double>());
          std::printf(" overhead_us ref=%.1f cand=%.1f blocks=%d batch=%d", ov_ref.back(),
                      ov_cand.back(), t.value("blocks", 0), t.value("batch", 1));
        }
        // The spread between the runners of one side (widens the
        // interval): the first two's ratio, the pooled per-process sd and
        // its degrees of freedom; and the bootstrap interval it widened.
        if (t.contains("process_spread") && t.contains("speedup_ci_bootstrap")) {
          const json& ps = t["process_spread"];
          const json& boot = t["speedup_ci_bootstrap"];
          if (ps.contains("log_ratio"))
            std::printf(" ref_a/ref_b=%.3f", std::exp(ps["log_ratio"].get<double>()));
          if (ps.contains("candidate_log_ratio"))
            std::printf(" cand_a/cand_b=%.3f", std::exp(ps["candidate_log_ratio"].get<double>()));
          if (ps.contains("process_rel_sd"))
            std::printf(" proc_sd=%.2f%%/%ddof", 100 * ps["process_rel_sd"].get<double>(),
                        ps.value("dof", 0));
          std::printf(" boot=[%.3f, %.3f]", boot[0].get<double>(), boot[1].get<double>());
        }
        // CPU: measure jobs run again after distrusted timing, and the
        // reference runners' time over the judge's own (timing_health).
        const json health = t.value("health", json::object());
        if (health.contains("reference_over_judge"))
          std::printf(" ref/judge=%.2f", health["reference_over_judge"].get<double>());
        if (evj.contains("timing_remeasured"))
          std::printf(" remeasured=%zu", evj["timing_remeasured"].size());
        const json faults = t.value("page_faults_per_call", json::object());
        if (faults.contains("ref") && faults.contains("cand"))
          std::printf(" faults ref=%.0f cand=%.0f", faults["ref"].get<double>(),
                      faults["cand"].get<double>());
        // CPU: whether every timing process kept its freed memory (heap=all),
        // none did (KORCH_TIMING_HEAP_ONLY=0: heap=off), or only some.
        const json heap = t.value("heap_only", json::object());
        if (heap.contains("runners") && heap["runners"].is_array()) {
          std::size_t on = heap.value("judge", false) ? 1 : 0;
          for (const auto& v : heap["runners"]) on += v.is_boolean() && v.get<bool>();
          const std::size_t all = heap["runners"].size() + 1;
          std::printf(" heap=%s", on == all ? "all" : on == 0 ? "off" : "some");
        }
        // CPU: (output - input) mod 4096 on each side, the most frequent.
        const json alias = t.value("alias_offsets", json::object());
        for (const char* side : {"ref", "cand"}) {
          const json top = alias.value(side, json::array());
          if (!top.empty() && top[0].is_array() && top[0].size() == 2)
            std::printf(" alias_%s=%d", side, top[0][0].get<int>());
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
    summary("ref_ms", ref_ms);
    summary("cand_ms", cand_ms);
    summary("eval overhead_s", overhead);
    if (!last_evidence.is_null()) {
      // Where the last evaluation's time went: the daemon's stages, then the
      // judge's phases (seconds from the judge's start to each phase's end).
      print_profile(last_evidence, "last run");
    }
    summary("gpu lease_s", lease);
    if (!speedups.empty())
      std::printf("intervals containing 1.0: %d of %zu\n", contains_one, speedups.size());
    if (do_bench && cuda) {
      // Triton's do_bench on the same reference and candidate, side by side.
      const std::string cmd = python + " tools/bench/do_bench.py --task '" + task_path +
                              "' --code '" + code_path + "' 2>/dev/null";
      std::string out;
      if (FILE* pp = popen(cmd.c_str(), "r")) {
        char buf[4096];
        while (std::fgets(buf, sizeof buf, pp)) out += buf;
        pclose(pp);
      }
      json db = json::parse(out.empty() ? "null" : out.substr(out.rfind('{')), nullptr, false);
      if (db.is_object() && !ref_ms.empty() && !cand_ms.empty()) {
        const double kr = median(ref_ms), kc = median(cand_ms);
        for (int i = 0; i < 2; ++i) {
          const double dr = db["ref_ms"][i].get<double>(), dc = db["cand_ms"][i].get<double>();
          std::printf(
              "do_bench run %d: ref=%.4fms cand=%.4fms speedup=%.3f | korch median ref=%.4fms "
              "(%+.1f%%) cand=%.4fms (%+.1f%%) speedup=%.3f\n",
              i + 1, dr, dc, dr / dc, kr, 100 * (kr / dr - 1), kc, 100 * (kc / dc - 1),
              median(speedups));
        }
        const double r1 = db["cand_ms"][0].get<double>(), r2 = db["cand_ms"][1].get<double>();
        std::printf("do_bench self-agreement (cand, run 2 vs 1): %+.1f%%\n", 100 * (r2 / r1 - 1));
      } else {
        std::printf("do_bench: no result (%s)\n", out.substr(0, 300).c_str());
      }
    }
  }
  (*ev)->shutdown();
  return 0;
}
