#include "evaluator/job_protocol.hpp"

namespace korch::evaluator::protocol {
namespace {

json parse_object(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json();
}

std::vector<std::string> strings(const json& j) {
  std::vector<std::string> v;
  if (j.is_array())
    for (auto& x : j)
      if (x.is_string()) v.push_back(x.get<std::string>());
  return v;
}

std::optional<double> number(const json& j, const char* k) {
  if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
  return std::nullopt;
}

std::vector<Violation> violations(const json& j) {
  std::vector<Violation> v;
  if (j.is_array())
    for (auto& x : j)
      if (x.is_object())
        v.push_back({x.value("rule", ""), x.value("line", 0), x.value("message", "")});
  return v;
}

LoadInline load_inline_of(const json& j) {
  LoadInline li;
  li.entry = j.value("entry", json::object());
  li.key = j.value("key", "");
  li.lineno = j.value("lineno", 0);
  if (j.contains("unresolved"))
    li.unresolved = j["unresolved"].is_string() ? j["unresolved"].get<std::string>() : "?";
  return li;
}

json common(const Settings& s) {
  json j;
  j["protocol"] = k_version;
  j["tolerance"] = to_string(s.tolerance);
  const auto tol = config::tolerance_profile(s.tolerance);
  j["atol"] = tol.atol;
  j["rtol"] = tol.rtol;
  j["low_precision_tol"] = tol.low_precision_tol;
  j["allow_tf32"] = tol.allow_tf32;
  j["torch_ops"] = to_string(s.torch_ops);
  j["memory_budget_mb"] = s.memory_budget_mb;
  j["device"] = s.gpu ? "cuda" : "cpu";
  if (s.reference_runners > 0) j["reference_runners"] = s.reference_runners;
  if (s.timing_lone_runners > 0) j["timing_lone_runners"] = s.timing_lone_runners;
  if (s.candidate_runners > 0) j["candidate_runners"] = s.candidate_runners;
  if (s.judge_shares_core) j["judge_shares_core"] = true;
  if (s.timing_batched_cap) j["timing_batched_cap"] = true;
  if (s.timing_block_ms > 0) j["timing_block_ms"] = s.timing_block_ms;
  if (s.timing_calibrations >= 0) j["timing_calibrations"] = s.timing_calibrations;
  if (s.timing_batch_us > 0) j["timing_batch_us"] = s.timing_batch_us;
  if (s.timing_spin_us >= 0) j["timing_spin_us"] = s.timing_spin_us;
  if (s.timing_heap_only >= 0) j["timing_heap_only"] = s.timing_heap_only == 1;
  if (s.timing_max_s > 0) j["timing_max_s"] = s.timing_max_s;
  if (s.timing_max_blocks > 0) j["timing_max_blocks"] = s.timing_max_blocks;
  if (s.timing_min_calls >= 0) j["timing_min_calls"] = s.timing_min_calls;
  if (s.timing_judge_writes) j["timing_judge_writes"] = true;
  if (!s.timing_split_compare) j["timing_split_compare"] = false;
  if (s.timing_stop_on_bootstrap) j["timing_stop_on_bootstrap"] = true;
  if (s.profile_first_call) j["profile_first_call"] = true;
  if (!s.gpu && !s.fake_cuda.empty()) {
    json fake = json::parse(s.fake_cuda, nullptr, false);
    if (fake.is_object()) j["fake_cuda"] = fake;
  }
  if (s.gpu) {
    j["l2_bytes"] = s.l2_bytes;
    j["runner_env"] = s.runner_env;
    j["runner_exec"] = s.runner_exec;
  }
  return j;
}

}  // namespace

std::string Spawn::dump() const {
  json e;
  e["memory_budget_mb"] = memory_budget_mb;
  if (memory_limit_mb > 0) e["memory_limit_mb"] = memory_limit_mb;
  if (gpu >= 0) e["gpu"] = gpu;
  if (!cpus.empty()) e["cpus"] = cpus;
  if (!build_dir.empty()) e["build_dir"] = build_dir;
  return e.dump();
}

json rules_job(const Settings& s, const std::string& code) {
  json j = common(s);
  j["code"] = code;
  return j;
}

json compile_job(const json& entry, const std::string& key, const std::string& build_dir,
                 const json& allow_extra, bool probe, const std::string& symbol_policy) {
  return {{"protocol", k_version},
          {"entry", entry},
          {"key", key},
          {"build_dir", build_dir},
          {"allow_extra", allow_extra},
          {"probe", probe},
          {"symbol_policy", symbol_policy}};
}

json recheck_job(const json& entry, const std::string& key, const std::string& build_dir,
                 const std::string& built, const json& manifest, const json& allow_extra,
                 const std::string& symbol_policy) {
  json j = compile_job(entry, key, build_dir, allow_extra, false, symbol_policy);
  j["recheck"] = true;
  j["built"] = built;
  j["manifest"] = manifest;
  return j;
}

json warm_job(const Settings& s, const std::string& code, const std::string& task_source,
              const json& prebuilt, const std::string& triton_cache) {
  json j = common(s);
  j["code"] = code;
  j["task_source"] = task_source;
  j["prebuilt"] = prebuilt;
  j["triton_cache"] = triton_cache;
  return j;
}

json measure_job(const Settings& s, const MeasureJob& m) {
  json j = common(s);
  j["mode"] = to_string(m.mode);
  j["code"] = m.code;
  j["task_source"] = m.task_source;
  j["task_name"] = m.task_name;
  j["prebuilt"] = m.prebuilt;
  j["timeout_s"] = m.timeout_s;
  if (m.work) j["work"] = *m.work;
  return j;
}

json gpuinfo_job() { return {{"protocol", k_version}, {"device", "cuda"}}; }

json validate_job(const std::string& task_source, const std::string& task_name,
                  std::int64_t memory_budget_mb, bool gpu) {
  return {{"protocol", k_version},
          {"task_source", task_source},
          {"task_name", task_name},
          {"memory_budget_mb", memory_budget_mb},
          {"device", gpu ? "cuda" : "cpu"}};
}

Result<RulesResult> parse_rules(const std::string& result_json) {
  json j = parse_object(result_json);
  if (j.is_null()) return fail("the rule job left no result");
  RulesResult r;
  if (j.contains("error")) {
    r.error = j["error"].is_string() ? j["error"].get<std::string>() : "rule checker failed";
    r.detail = j.value("detail", "");
    return r;
  }
  r.ok = j.value("ok", false);
  r.violations_json = j.value("violations", json::array());
  r.violations = violations(r.violations_json);
  if (j.contains("rules_version") && j["rules_version"].is_string())
    r.rules_version = j["rules_version"].get<std::string>();
  r.protections = strings(j.value("protections", json::array()));
  // (an unknown word stays `unknown`: the rules' verdict, not the language,
  // decides whether the candidate runs)
  if (j["language"].is_string())
    r.language = enum_from_name<CandidateLanguage>(j["language"].get<std::string>())
                     .value_or(CandidateLanguage::unknown);
  for (auto& li : j.value("load_inline", json::array()))
    r.load_inline.push_back(load_inline_of(li));
  if (j.contains("glue_probe") && j["glue_probe"].is_object())
    r.glue_probe = load_inline_of(j["glue_probe"]);
  r.symbol_policy = j.value("symbol_policy", "");
  return r;
}

Result<CompileManifest> parse_manifest(const std::string& text) {
  json j = parse_object(text);
  if (j.is_null()) return fail("unreadable compile manifest");
  CompileManifest m;
  // The worker writes one of three; anything else is a protocol error (a
  // manifest without a status is a compile that ended before writing one).
  const std::string status = j.value("status", "compile_error");
  auto s = enum_from_name<CompileStatus>(status);
  if (!s) return fail("compile manifest: unknown status '" + status + "'");
  m.status = *s;
  m.log = j.value("log", "");
  m.module = j.value("module", "");
  m.so = j.value("so", "");
  m.violations = violations(j.value("violations", json::array()));
  m.undefined = j.value("undefined", json::array());
  m.symbol_policy = j.value("symbol_policy", "");
  m.compile_s = j.value("compile_s", 0.0);
  m.protections = j.value("protections", json::array());
  return m;
}

WarmResult parse_warm(const std::string& result_json) {
  json j = parse_object(result_json);
  WarmResult w;
  if (j.is_null()) return w;
  w.ok = j.value("ok", false);
  w.error = j.value("error", "");
  return w;
}

bool has_result(const std::string& result_json) {
  json j = parse_object(result_json);
  return !j.is_null() && j.contains("verdict");
}

std::string MeasureResult::timing_distrust() const {
  if (timing_health.ok) return {};
  std::string why;
  for (const auto& reason : timing_health.reasons) why += (why.empty() ? "" : "; ") + reason;
  return why.empty() ? "the judge did not trust its runners' times" : why;
}

bool MeasureResult::timing_distrust_is_machine() const {
  return !timing_health.ok && timing_health.machine;
}

TimingOutcome timing_outcome(const MeasureResult& m, int measurements, int max_measurements) {
  if (m.timing_health.ok) return TimingOutcome::keep;
  if (measurements < max_measurements) return TimingOutcome::measure_again;
  if (m.verdict != Verdict::ok) return TimingOutcome::keep;
  return m.timing_health.machine ? TimingOutcome::host_fault : TimingOutcome::impossible_timing;
}

Result<MeasureResult> parse_measure(const std::string& result_json) {
  json j = parse_object(result_json);
  if (j.is_null() || !j.contains("verdict")) return fail("the measure job left no result");
  MeasureResult m;
  const std::string name = j["verdict"].is_string() ? j["verdict"].get<std::string>() : "";
  auto v = verdict_from_string(name);
  if (!v)
    return fail("the judge returned an unknown verdict '" + name +
                "' (worker/daemon version mismatch?)");
  m.verdict = *v;
  m.correct = j.value("correct", false);
  for (const auto& [name, member] : k_measured_fields) m.*member = number(j, name);
  m.error = j.value("error", "");
  m.runtime_detail = j.value("runtime_detail", "");
  m.notes = strings(j.value("notes", json::array()));
  m.infrastructure = j.value("infrastructure", "");
  m.protections = strings(j.value("protections", json::array()));
  m.candidate_protections = strings(j.value("candidate_protections", json::array()));
  m.evidence = j.value("evidence", json::object());
  if (m.evidence.is_object()) {
    if (auto t = m.evidence.find("timing"); t != m.evidence.end() && t->is_object())
      if (auto h = t->find("health"); h != t->end()) m.timing_health = read_TimingHealth(*h);
    if (auto w = m.evidence.find("work"); w != m.evidence.end())
      m.counted_work = read_CountedWork(*w);
  }
  return m;
}

GpuInfo parse_gpuinfo(const std::string& result_json) {
  json j = parse_object(result_json);
  GpuInfo g;
  if (j.is_null()) return g;
  g.raw = j;
  g.ok = j.value("ok", false);
  g.health = j.value("health", false);
  g.error = j.value("error", "");
  g.name = j.value("name", "");
  g.capability = j.value("capability", "");
  g.torch = j.value("torch", "");
  g.cuda = j.value("cuda", "");
  g.sms = j.value("sms", 0);
  g.count = j.value("count", 0);
  g.memory_bytes = j.value("memory_bytes", 0.0);
  g.l2_bytes = j.value("l2_bytes", 0.0);
  return g;
}

Result<ValidateResult> parse_validate(const std::string& result_json) {
  json j = parse_object(result_json);
  if (j.is_null()) return fail("the validation job left no result");
  ValidateResult v;
  v.issues = strings(j.value("issues", json::array()));
  v.estimated_bytes = j.value("estimated_bytes", std::int64_t{0});
  v.ref_time_ms = j.value("ref_time_ms", 0.0);
  v.protections = strings(j.value("protections", json::array()));
  return v;
}

}  // namespace korch::evaluator::protocol
