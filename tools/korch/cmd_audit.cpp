// korch audit: the verdict card. Runs a corpus of honest kernels and of
// attacks through the one evaluator (the one `korch eval` and every campaign
// use) and prints korch's own error rates: attack success x/N (an attack
// scored `ok`) and false rejection y/M (an honest kernel scored anything
// else), each with a 95% Wilson interval, per attack class and overall.
//
// The corpus is the layout of tests/evaluator/corpus:
//   cpu  good/*.py, hacks/*.py and wrong/*.py, each with `# task: STEM` and
//        `# expect: VERDICT [RULE]` headers (and `# rules: off` where the
//        entry tests a later guard alone, as its own test runs it); tasks resolve in
//        <corpus>/../tasks and <corpus>/../../../examples/tasks.
//        An honest entry brings a kernel (load_inline or Triton); a good
//        entry without one is no_kernel by design and not counted. A hack
//        whose expectation is `ok` asserts on effects (the sandbox entries)
//        and is not counted either. A wrong entry is a correct entry made
//        wrong (a control): it must not be `ok`, or the honest entries'
//        passing says nothing; controls are on the card apart from the rates.
//   gpu  gpu/manifest.json ({file, task, expect}; task under --kernelbench).
//   attack_classes.json names each hack entry's class (docs/rules.md).
// --store DB records the card in a campaign store (verdict_cards, keyed by
// evaluator version, rules version and device), where `korch report`, the
// dashboard and the export's dataset card find it.
#include <fmt/format.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <ctime>
#include <functional>
#include <random>

#include "agent/episode.hpp"
#include "store/store.hpp"
#include "config/tasks.hpp"
#include "evaluator/evaluator.hpp"
#include "tools/korch/cli.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Entry {
  std::string name;                 // "hacks/rt_raise", "gpu/good/triton_relu"
  std::string role;                 // "honest", "attack", "control", or "" (not counted)
  std::string why_not_counted;      // for role ""
  std::string cls;                  // attack class
  std::vector<std::string> expect;  // the verdicts the entry expects (any of)
  bool rules = true;                // `# rules: off`: a later guard tested alone
  config::Task task;
  std::string code;
  evaluator::Report report;
};

// The value of header `# key: value` in the leading comment block.
std::string header(const std::string& code, const std::string& key) {
  std::size_t pos = 0;
  const std::string tag = "# " + key + ":";
  while (pos < code.size() && code[pos] == '#') {
    std::size_t eol = code.find('\n', pos);
    std::string line = code.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (line.rfind(tag, 0) == 0) {
      auto v = line.substr(tag.size());
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return {};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= s.size()) {
    auto e = s.find(sep, b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

bool brings_kernel(const std::string& code) {
  return code.find("load_inline") != std::string::npos || code.find("triton") != std::string::npos;
}

Result<config::Task> task_by_stem(const fs::path& corpus, const std::string& stem) {
  for (const auto& dir :
       {corpus / ".." / "tasks", corpus / ".." / ".." / ".." / "examples" / "tasks"}) {
    auto p = dir / (stem + ".py");
    if (fs::exists(p)) return config::load_task_file(p.string());
  }
  return fail(ErrorKind::invalid,
              "no task " + stem + " beside the corpus (tasks/, examples/tasks/)");
}

// The attack class of each hack entry (attack_classes.json).
std::map<std::string, std::string> classes_of(const fs::path& corpus) {
  std::map<std::string, std::string> out;
  auto text = read_file((corpus / "attack_classes.json").string());
  if (!text) return out;
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& c : j)
    for (const auto& e : c.value("entries", json::array()))
      if (e.is_string()) out[e.get<std::string>()] = c.value("class", "");
  return out;
}

Result<std::vector<Entry>> cpu_entries(const fs::path& corpus, const std::string& only) {
  auto classes = classes_of(corpus);
  std::vector<Entry> out;
  for (const char* sub : {"good", "hacks", "wrong"}) {
    std::vector<fs::path> files;
    std::error_code ec;
    if (std::string(sub) == "wrong" && !fs::exists(corpus / sub)) continue;
    for (const auto& e : fs::directory_iterator(corpus / sub, ec))
      if (e.path().extension() == ".py") files.push_back(e.path());
    if (ec)
      return fail(ErrorKind::invalid, fmt::format("{}: {}", (corpus / sub).string(), ec.message()));
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      Entry en;
      en.name = std::string(sub) + "/" + p.stem().string();
      if (!only.empty() && en.name.find(only) == std::string::npos) continue;
      auto code = read_file(p.string());
      if (!code) return std::unexpected(code.error());
      en.code = *code;
      auto stem = header(en.code, "task");
      auto expect = split(header(en.code, "expect"), ' ');
      if (stem.empty() || expect.empty() || header(en.code, "mode") == "gpu") continue;
      en.expect = {expect[0]};
      en.rules = header(en.code, "rules") != "off";
      if (std::string(sub) == "wrong") {
        en.role = "control";
      } else if (std::string(sub) == "good") {
        en.role = brings_kernel(en.code) ? "honest" : "";
        if (en.role.empty()) en.why_not_counted = "no kernel by design (no_kernel expected)";
      } else {
        en.role = en.expect[0] == "ok" ? "" : "attack";
        if (en.role.empty()) en.why_not_counted = "asserts on effects (its own test)";
        auto c = classes.find(en.name);
        en.cls = c == classes.end() ? "unclassified" : c->second;
      }
      auto task = task_by_stem(corpus, stem);
      if (!task) return fail(ErrorKind::invalid, en.name + ": " + task.error().message);
      en.task = std::move(*task);
      out.push_back(std::move(en));
    }
  }
  return out;
}

Result<std::vector<Entry>> gpu_entries(const fs::path& corpus, const std::string& kernelbench,
                                       const std::string& only) {
  if (kernelbench.empty())
    return fail(ErrorKind::invalid,
                "--mode gpu needs --kernelbench DIR (the KernelBench problems)");
  auto classes = classes_of(corpus);
  auto text = read_file((corpus / "gpu" / "manifest.json").string());
  if (!text) return std::unexpected(text.error());
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_array()) return fail(ErrorKind::invalid, "gpu/manifest.json: not a JSON array");
  std::vector<Entry> out;
  for (const auto& m : j) {
    Entry en;
    auto file = m.value("file", "");
    en.name = "gpu/" + file.substr(0, file.size() - (file.size() > 3 ? 3 : 0));
    if (!only.empty() && en.name.find(only) == std::string::npos) continue;
    auto code = read_file((corpus / "gpu" / file).string());
    if (!code) return std::unexpected(code.error());
    en.code = *code;
    en.expect = split(m.value("expect", ""), '|');
    if (en.expect.empty()) continue;
    const bool ok = en.expect.size() == 1 && en.expect[0] == "ok";
    en.role = ok ? "honest" : "attack";
    if (!ok) {
      auto c = classes.find(en.name);
      en.cls = c == classes.end() ? "unclassified" : c->second;
    }
    auto task = config::load_task_file((fs::path(kernelbench) / m.value("task", "")).string());
    if (!task) return fail(ErrorKind::invalid, en.name + ": " + task.error().message);
    en.task = std::move(*task);
    out.push_back(std::move(en));
  }
  return out;
}

// The 95% Wilson score interval of x successes in n trials.
std::pair<double, double> wilson(int x, int n) {
  if (n == 0) return {0.0, 1.0};
  const double z = 1.96, p = static_cast<double>(x) / n, z2n = z * z / n;
  const double centre = (p + z2n / 2) / (1 + z2n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2n / (4.0 * n)) / (1 + z2n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

json rate(int x, int n) {
  auto [lo, hi] = wilson(x, n);
  return {{"x", x}, {"n", n}, {"rate", n ? static_cast<double>(x) / n : 0.0}, {"ci95", {lo, hi}}};
}

std::string rate_text(const json& r) {
  return fmt::format("{}/{}  ({:.1f}%, 95% CI {:.1f}–{:.1f}%)", r["x"].get<int>(),
                     r["n"].get<int>(), 100 * r["rate"].get<double>(),
                     100 * r["ci95"][0].get<double>(), 100 * r["ci95"][1].get<double>());
}

// What the corpus's own check (tests/tools/check_card.py) asserts beyond the
// verdict: the rule, the reward, the speedup and the timing's shape.
json facts_of(const evaluator::Report& r) {
  json f = {{"rule_id", r.rule_id},
            {"mode", r.mode},
            {"evaluator_version", r.evaluator_version},
            {"correct", r.correct},
            {"reward", r.reward},
            {"speedup", r.speedup ? json(*r.speedup) : json(nullptr)},
            {"speedup_ci", r.speedup_ci_low && r.speedup_ci_high
                               ? json::array({*r.speedup_ci_low, *r.speedup_ci_high})
                               : json(nullptr)}};
  const auto& ev = r.evidence;
  if (!ev.is_object()) return f;
  // Every rule a violation names (the rules stage's and the symbols stage's).
  json rules = json::array();
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      if (j.contains("rule") && j["rule"].is_string()) rules.push_back(j["rule"]);
      for (const auto& [k, v] : j.items()) walk(v);
    } else if (j.is_array()) {
      for (const auto& v : j) walk(v);
    }
  };
  walk(ev);
  f["rules"] = rules;
  const json t = ev.value("measure", json::object()).value("timing", json::object());
  if (!t.empty()) {
    json timing = json::object();
    for (const char* k : {"reference_runners", "candidate_runners", "process_spread",
                          "speedup_ci_bootstrap", "spin_us", "batch", "block_calls",
                          "block_warmup", "blocks", "heap_only"})
      if (t.contains(k)) timing[k] = t[k];
    timing["ref_ns_count"] = t.value("ref_ns", json::array()).size();
    timing["cand_ns_count"] = t.value("cand_ns", json::array()).size();
    f["timing"] = timing;
  }
  return f;
}

// Records `card` (korch audit's JSON) in the store at `db`: one
// verdict_cards row, keyed by evaluator version, rules version and device.
int store_card(const std::string& db, json card) {
  for (const char* k : {"mode", "evaluator_version", "rules_version", "device"})
    if (!card.contains(k) || !card[k].is_string())
      return report_failure("audit", ErrorKind::invalid, std::string("the card has no ") + k);
  for (const char* k : {"attack_success", "false_rejection"})
    if (!card.contains(k) || !card[k].is_object() || !card[k].contains("x") || !card[k].contains("n"))
      return report_failure("audit", ErrorKind::invalid, std::string("the card has no ") + k);
  auto location = store::parse_location(db);
  if (!location) return report_failure("audit", location.error());
  store::Options so;
  so.path = location->target;
  auto st = store::Store::open(so);
  if (!st) return report_failure("audit", st.error());
  store::VerdictCardRow row;
  row.evaluator_version = card["evaluator_version"].get<std::string>();
  row.rules_version = card["rules_version"].get<std::string>();
  row.device = card["device"].get<std::string>();
  row.mode = card["mode"].get<std::string>();
  row.attacks_accepted = card["attack_success"]["x"].get<int>();
  row.attacks = card["attack_success"]["n"].get<int>();
  row.honest_rejected = card["false_rejection"]["x"].get<int>();
  row.honest = card["false_rejection"]["n"].get<int>();
  card.erase("entries");  // the card; the per-entry rows stay in --json's output
  row.card_json = card.dump();
  row.measured_at = card.value("measured_at", static_cast<double>(std::time(nullptr)));
  store::WriteBatch batch;
  batch.put(std::move(row));
  auto done = (*st)->commit_sync(std::move(batch));
  (*st)->close();
  if (!done) return report_failure("audit", done.error());
  std::fprintf(stderr, "audit: card stored in %s (evaluator %s, rules %s)\n",
               store::redact_url(db).c_str(), card["evaluator_version"].get<std::string>().c_str(),
               card["rules_version"].get<std::string>().c_str());
  return k_exit_ok;
}

}  // namespace

int cmd_audit(const Args& args) {
  log::init(args.get("--log-level").value_or("warn"));
  // A card an earlier `korch audit --json --out F` wrote, recorded without
  // running the corpus again (CI runs it once).
  if (auto from = args.get("--from-card")) {
    auto db = args.get("--store");
    if (!db) return report_failure("audit", ErrorKind::invalid, "--from-card needs --store");
    auto text = read_file(*from);
    if (!text) return report_failure("audit", text.error());
    auto card = json::parse(*text, nullptr, false);
    if (!card.is_object()) return report_failure("audit", ErrorKind::invalid, *from + ": not a card");
    return store_card(*db, std::move(card));
  }
  const std::string mode = args.get("--mode").value_or("cpu");
  const bool gpu = mode == "gpu";
  const fs::path corpus = args.get("--corpus").value_or("tests/evaluator/corpus");
  const std::string only = args.get("--only").value_or("");
  ::prctl(PR_SET_DUMPABLE, 0);
  auto entries = gpu ? gpu_entries(corpus, args.get("--kernelbench").value_or(""), only)
                     : cpu_entries(corpus, only);
  if (!entries) return report_failure("audit", entries.error());
  if (entries->empty())
    return report_failure("audit", ErrorKind::invalid, "no corpus entries in " + corpus.string());

  config::EvaluatorConfig cfg;
  cfg.mode = gpu ? config::EvalMode::gpu : config::EvalMode::cpu;
  auto workers = get_number<std::int64_t>(args, "--workers");
  auto timeout = get_number<double>(args, "--timeout");
  if (!workers) return report_failure("audit", workers.error());
  if (!timeout) return report_failure("audit", timeout.error());
  cfg.workers = static_cast<int>(workers->value_or(2));
  cfg.timeout_s = timeout->value_or(60);
  if (auto g = args.get("--gpus")) cfg.gpus = *g;
  // The timed blocks' cap (the judge's default is 15 s an evaluation): a
  // shorter cap widens the speedup's interval and checks every output alike.
  // Set for this process's evaluator only, read once when it starts, and
  // named on the card and in every report's evidence (env_knobs).
  auto timing_max_s = get_number<double>(args, "--timing-max-s");
  if (!timing_max_s) return report_failure("audit", timing_max_s.error());
  if (*timing_max_s) {
    if (!(**timing_max_s > 0))
      return report_failure("audit", ErrorKind::invalid, "--timing-max-s must be > 0");
    ::setenv("KORCH_TIMING_MAX_S", fmt::format("{}", **timing_max_s).c_str(), 1);
  }
  auto ev = evaluator::make_evaluator(cfg, args.get("--cache-dir").value_or(default_cache_dir()));
  if (!ev) return report_failure("audit", ErrorKind::failure, ev.error().message);

  std::random_device rd;
  auto run_one = [&](Entry& en) {
    evaluator::Request req;
    req.mode = evaluator::Mode::submit;
    req.request_id = "audit|" + en.name;
    req.task = en.task;
    req.code = en.code;
    req.device = cfg.mode;
    req.rules = en.rules;
    req.secret_seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    auto done = std::make_shared<std::promise<evaluator::Report>>();
    auto fut = done->get_future();
    (*ev)->evaluate(std::move(req), [done](evaluator::Report r) { done->set_value(std::move(r)); });
    return fut;
  };
  std::vector<std::future<evaluator::Report>> futs;
  for (auto& en : *entries) futs.push_back(run_one(en));
  for (std::size_t i = 0; i < entries->size(); ++i) {
    auto& en = (*entries)[i];
    en.report = futs[i].get();
    // The host's fault runs again, at most as many runs as an episode gives it.
    for (int run = 2; run <= agent::k_max_eval_attempts && en.report.host_fault(); ++run)
      en.report = run_one(en).get();
    std::fprintf(stderr, "audit: %-44s %s\n", en.name.c_str(),
                 evaluator::to_string(en.report.status));
  }
  const std::string version = (*ev)->version(), device = (*ev)->device_description();
  (*ev)->shutdown();

  // The card.
  int attacks = 0, accepted = 0, honest = 0, rejected = 0, controls = 0, controls_passed = 0;
  std::map<std::string, std::pair<int, int>> by_class;  // class -> (accepted, n)
  std::string rules_version;
  json rows = json::array();
  for (const auto& en : *entries) {
    const auto verdict = std::string(evaluator::to_string(en.report.status));
    const auto& rules = en.report.evidence.is_object()
                            ? en.report.evidence.value("rules", json::object())
                            : json::object();
    if (rules.is_object() && rules.contains("rules_version") &&
        rules["rules_version"].is_string() && !rules["rules_version"].get<std::string>().empty())
      rules_version = rules["rules_version"].get<std::string>();
    bool wrong = false;
    if (en.role == "attack") {
      ++attacks;
      wrong = en.report.status == evaluator::Verdict::ok;
      accepted += wrong;
      auto& c = by_class[en.cls];
      c.first += wrong;
      c.second += 1;
    } else if (en.role == "honest") {
      ++honest;
      wrong = en.report.status != evaluator::Verdict::ok;
      rejected += wrong;
    } else if (en.role == "control") {
      ++controls;
      wrong = en.report.status == evaluator::Verdict::ok;
      controls_passed += wrong;
    }
    rows.push_back({{"entry", en.name},
                    {"role", en.role},
                    {"class", en.cls},
                    {"verdict", verdict},
                    {"expect", en.expect},
                    {"wrong", wrong},
                    {"rules", en.rules ? "on" : "off"},
                    {"not_counted", en.why_not_counted},
                    {"error", en.report.error.substr(0, 300)},
                    {"facts", facts_of(en.report)}});
  }
  json knobs = json::object();
  for (const auto& en : *entries)
    if (en.report.evidence.is_object() && en.report.evidence.contains("env_knobs")) {
      knobs = en.report.evidence["env_knobs"];
      break;
    }
  json classes = json::array();
  for (const auto& [name, c] : by_class)
    classes.push_back({{"class", name}, {"attack_success", rate(c.first, c.second)}});
  json card = {{"mode", mode},
               {"measured_at", static_cast<double>(std::time(nullptr))},
               {"evaluator_version", version},
               {"rules_version", rules_version},
               {"device", device},
               {"corpus", corpus.string()},
               {"attack_success", rate(accepted, attacks)},
               {"false_rejection", rate(rejected, honest)},
               {"controls", {{"passed", controls_passed}, {"n", controls}}},
               {"knobs", knobs},
               {"classes", classes},
               {"entries", rows}};

  std::string out;
  if (args.has("--json")) {
    out = card.dump(1) + "\n";
  } else {
    out += fmt::format("korch audit: {} mode, evaluator {}, rules {}, device: {}\n", mode, version,
                       rules_version.empty() ? "?" : rules_version, device);
    out += fmt::format("  attack success   {}\n", rate_text(card["attack_success"]));
    out += fmt::format("  false rejection  {}\n", rate_text(card["false_rejection"]));
    if (controls)
      out += fmt::format("  controls         {}/{} wrong variants of honest entries accepted\n",
                         controls_passed, controls);
    if (!knobs.empty()) out += fmt::format("  knobs            {}\n", knobs.dump());
    out += "  by attack class:\n";
    for (const auto& c : classes)
      out += fmt::format("    {:<60} {}\n", c["class"].get<std::string>(),
                         rate_text(c["attack_success"]));
    for (const auto& r : rows)
      if (r["wrong"].get<bool>())
        out += fmt::format("  WRONG {} ({}): {} {}\n", r["entry"].get<std::string>(),
                           r["role"].get<std::string>(), r["verdict"].get<std::string>(),
                           r["error"].get<std::string>());
    int skipped = 0;
    for (const auto& r : rows) skipped += r["role"].get<std::string>().empty();
    if (skipped)
      out += fmt::format("  not counted: {} entries (no kernel by design, or effect-tested)\n",
                         skipped);
  }
  if (auto path = args.get("--out")) {
    if (auto w = write_file_atomic(*path, out); !w) return report_failure("audit", w.error());
  } else {
    std::fputs(out.c_str(), stdout);
  }
  if (auto db = args.get("--store"))
    if (int rc = store_card(*db, card); rc != k_exit_ok) return rc;
  // Exit 1 when the card is not clean: an attack accepted, an honest kernel
  // rejected, or a wrong variant of an honest kernel accepted.
  return accepted || rejected || controls_passed ? k_exit_error : k_exit_ok;
}

}  // namespace korch::cli
