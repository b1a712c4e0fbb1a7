#pragma once
// Shared helpers for the cpu evaluator tests: one evaluator per test binary on
// the shared compile cache (KORCH_TEST_CACHE, /var/tmp by default, so each
// distinct native source compiles once per build tree), corpus headers, and
// a blocking evaluate().
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "config/tasks.hpp"
#include "evaluator/protected_evaluator.hpp"
#include "util/fs.hpp"

namespace korch::evaluator::testing {

inline const std::string k_source_dir = KORCH_SOURCE_DIR;
inline const std::string k_cache_dir = KORCH_TEST_CACHE;

struct CorpusFile {
  std::string path, name, task, expect, rule_id, mode;
  bool rules = true;
  std::string code;
};

inline CorpusFile read_corpus(const std::filesystem::path& p) {
  CorpusFile f;
  f.path = p.string();
  f.name = p.parent_path().filename().string() + "/" + p.stem().string();
  f.code = read_file(p).value_or("");
  size_t pos = 0;
  while (pos < f.code.size()) {
    size_t eol = f.code.find('\n', pos);
    std::string line = f.code.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? f.code.size() : eol + 1;
    if (line.rfind("#", 0) != 0) break;
    auto val = [&](const char* key) -> std::optional<std::string> {
      std::string k = std::string("# ") + key + ":";
      if (line.rfind(k, 0) != 0) return std::nullopt;
      std::string v = line.substr(k.size());
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
      return v;
    };
    if (auto v = val("task")) f.task = *v;
    if (auto v = val("mode")) f.mode = *v;
    if (auto v = val("rules")) f.rules = *v != "off";
    if (auto v = val("expect")) {
      auto sp = v->find(' ');
      f.expect = v->substr(0, sp);
      if (sp != std::string::npos) f.rule_id = v->substr(sp + 1);
    }
  }
  return f;
}

inline std::vector<CorpusFile> corpus(const std::string& sub) {
  std::vector<CorpusFile> out;
  std::error_code ec;
  for (auto& e :
       std::filesystem::directory_iterator(k_source_dir + "/tests/evaluator/corpus/" + sub, ec)) {
    if (e.path().extension() == ".py") out.push_back(read_corpus(e.path()));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

// Task stems resolve in examples/tasks, then tests/evaluator/tasks.
inline Result<config::Task> task_by_stem(const std::string& stem) {
  for (auto dir : {"/examples/tasks/", "/tests/evaluator/tasks/"}) {
    std::string p = k_source_dir + dir + stem + ".py";
    if (std::filesystem::exists(p)) return config::load_task_file(p);
  }
  return fail("no task " + stem);
}

inline config::EvaluatorConfig test_config(int workers = 2, double timeout_s = 30) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::cpu;
  cfg.workers = workers;
  cfg.timeout_s = timeout_s;
  cfg.memory_budget_mb = 1024;
  return cfg;
}

inline std::future<Report> submit(Evaluator& ev, Request req) {
  auto p = std::make_shared<std::promise<Report>>();
  auto f = p->get_future();
  ev.evaluate(std::move(req), [p](Report r) { p->set_value(std::move(r)); });
  return f;
}

inline Request make_request(const CorpusFile& f, const config::Task& task, Mode mode,
                            std::uint64_t seed = 0x5eed) {
  Request r;
  r.request_id = "test|" + f.name;
  r.mode = mode;
  r.task = task;
  r.code = f.code;
  r.secret_seed = seed;
  r.rules = f.rules;
  return r;
}

// Evaluates tests/evaluator/corpus/<corpus_file> as a solution of the task
// `task_stem` in `mode`; `report` is its report.
inline void evaluate_corpus_file(Evaluator& ev, const std::string& corpus_file,
                                 const std::string& task_stem, Mode mode, Report& report) {
  auto f = read_corpus(k_source_dir + "/tests/evaluator/corpus/" + corpus_file);
  auto task = task_by_stem(task_stem);
  ASSERT_TRUE(task) << task_stem;
  report = submit(ev, make_request(f, *task, mode)).get();
}

}  // namespace korch::evaluator::testing
