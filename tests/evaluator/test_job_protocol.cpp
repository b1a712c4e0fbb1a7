// The job protocol's types (evaluator/job_protocol.hpp): what the daemon
// writes, what it accepts back, and a real korch-worker refusing a job of
// another protocol version.
#include "evaluator/job_protocol.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "evaluator/zygote.hpp"
#include "store/vocabulary.hpp"
#include "util/fs.hpp"

namespace korch::evaluator::protocol {
namespace {

// The Verdict enum and its names are generated from protocol.json at build
// time (evaluator/protocol/gen_protocol.cmake); the Python worker reads the
// same file (tests/evaluator/worker/test_protocol_schema.py). Here: the
// generated side is the file, in its order, and every name round-trips.
TEST(JobProtocol, VerdictsAreTheSchemas) {
  const auto text = read_file(KORCH_SOURCE_DIR "/evaluator/protocol/protocol.json");
  ASSERT_TRUE(text);
  const auto schema = nlohmann::json::parse(*text);
  ASSERT_EQ(schema.at("verdicts").size(), schema::k_verdict_names.size());
  for (std::size_t i = 0; i < schema::k_verdict_names.size(); ++i) {
    const std::string name = schema.at("verdicts").at(i).at("name");
    EXPECT_EQ(std::string(to_string(static_cast<Verdict>(i))), name);
    auto back = verdict_from_string(name);
    ASSERT_TRUE(back) << name;
    EXPECT_EQ(static_cast<std::size_t>(*back), i);
  }
  EXPECT_FALSE(verdict_from_string("incorect"));
  EXPECT_EQ(std::string(schema::k_evaluator_version),
            schema.at("evaluator_version").get<std::string>());
  EXPECT_EQ(k_version, schema.at("job_protocol").get<int>());
}

// Issue 46: every verdict of the protocol has a class in the exports' table
// (store::k_verdict_classes), and the hack-like ones are labelled so.
TEST(JobProtocol, EveryVerdictHasAClass) {
  const auto schema = nlohmann::json::parse(
      read_file(KORCH_SOURCE_DIR "/evaluator/protocol/protocol.json").value_or("{}"));
  ASSERT_TRUE(schema.contains("verdicts"));
  for (const auto& v : schema.at("verdicts")) {
    const std::string name = v.at("name");
    bool found = false;
    for (const auto& [n, c] : store::k_verdict_classes) found |= n == name;
    EXPECT_TRUE(found) << name << " has no class in store::k_verdict_classes";
  }
  EXPECT_EQ(std::size(store::k_verdict_classes), schema.at("verdicts").size());
  for (const char* hack : {"no_kernel", "rule_violation", "impossible_timing"})
    EXPECT_EQ(store::verdict_class(hack), store::VerdictClass::hack_like) << hack;
  EXPECT_EQ(store::verdict_class("ok"), store::VerdictClass::ok);
  EXPECT_EQ(store::verdict_class("incorrect"), store::VerdictClass::failed);
  EXPECT_EQ(to_string(store::verdict_class("worker_crash")), "not_judged");
}

TEST(JobProtocol, JobsCarryTheVersionAndTheToleranceTable) {
  Settings s;
  s.tolerance = config::Tolerance::strict;
  s.memory_budget_mb = 1024;
  MeasureJob m;
  m.mode = Mode::submit;
  m.code = "code";
  m.task_source = "src";
  m.task_name = "t";
  m.work = json{{"flops", 1.0}};
  json j = measure_job(s, m);
  EXPECT_EQ(j["protocol"], k_version);
  EXPECT_EQ(j["mode"], "submit");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["atol"], config::tolerance_profile(config::Tolerance::strict).atol);
  EXPECT_EQ(j["work"]["flops"], 1.0);
  EXPECT_FALSE(j.contains("runner_env"));  // gpu-only fields stay out of cpu jobs
  s.gpu = true;
  s.l2_bytes = 50 << 20;
  EXPECT_EQ(rules_job(s, "x")["l2_bytes"], 50 << 20);
  for (const json& other : {gpuinfo_job(), validate_job("s", "n", 1, false),
                            compile_job(json::object(), "k", "/b", json::array(), false)})
    EXPECT_EQ(other["protocol"], k_version);
  Spawn sp;
  sp.memory_budget_mb = 7;
  sp.gpu = 1;
  sp.cpus = {2, 3};
  json e = json::parse(sp.dump());
  EXPECT_EQ(e["gpu"], 1);
  EXPECT_EQ(e["cpus"], json::array({2, 3}));
  EXPECT_FALSE(e.contains("memory_limit_mb"));
}

TEST(JobProtocol, MeasureResultsParseAndUnknownVerdictsAreErrors) {
  auto ok = parse_measure(R"({"verdict":"ok","correct":true,"speedup":1.5,"speedup_ci_low":1.4,
                              "evidence":{"work":{"flops":3}},"candidate_protections":["seccomp"]})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->verdict, Verdict::ok);
  EXPECT_EQ(ok->speedup, 1.5);
  EXPECT_FALSE(ok->speedup_ci_high.has_value());
  EXPECT_EQ(ok->work()["flops"], 3);
  EXPECT_EQ(ok->candidate_protections, std::vector<std::string>{"seccomp"});
  auto unknown = parse_measure(R"({"verdict":"brilliant"})");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown verdict 'brilliant'"), std::string::npos);
  EXPECT_FALSE(parse_measure(""));
  EXPECT_FALSE(parse_measure(R"({"error":"x"})"));
  EXPECT_FALSE(has_result("{}"));
}

TEST(JobProtocol, DistrustedTimingNamesTheJudgesReasons) {
  // Trusted: no health (GPU jobs, older workers) or health ok.
  auto plain = parse_measure(R"({"verdict":"ok","evidence":{"timing":{}}})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->timing_distrust(), "");
  auto fine = parse_measure(R"({"verdict":"ok","evidence":{"timing":{"health":{"ok":true,
                                "reasons":[]}}}})");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->timing_distrust(), "");
  auto bad = parse_measure(R"({"verdict":"ok","evidence":{"timing":{"health":{"ok":false,
                               "reasons":["the two candidate runners' medians differ 30.00x",
                                          "the reference runners take 42.0x"]}}}})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->timing_distrust(),
            "the two candidate runners' medians differ 30.00x; the reference runners take 42.0x");
  auto bare = parse_measure(R"({"verdict":"ok","evidence":{"timing":{"health":{"ok":false}}}})");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->timing_distrust(), "the judge did not trust its runners' times");
}

// Issue #49: the measure result's numbers and the judge's evidence the daemon
// decides on are described in protocol.json and generated from it: Measured
// (k_measured_fields) and the typed TimingHealth and CountedWork, each field
// read from the JSON the judge writes; absent parts read as their defaults.
TEST(JobProtocol, TheMeasureResultsTypedPartsAreTheSchemas) {
  const auto text = read_file(KORCH_SOURCE_DIR "/evaluator/protocol/protocol.json");
  ASSERT_TRUE(text);
  const auto schema = nlohmann::json::parse(*text);
  const auto& measured = schema.at("measure_result").at("measured").at("fields");
  ASSERT_EQ(measured.size(), std::size(k_measured_fields));
  for (std::size_t i = 0; i < measured.size(); ++i)
    EXPECT_EQ(measured.at(i).at("name").get<std::string>(), k_measured_fields[i].first);

  auto m = parse_measure(R"({"verdict":"ok","speedup":1.25,"speedup_ci_low":1.2,
      "speedup_ci_high":1.3,"evidence":{"timing":{"health":{"judge_reference_ns":1000,
      "reference_runner_ratio":1.02,"candidate_runner_ratio":31.5,"reference_over_judge":0.9,
      "ok":false,"machine":false,"reasons":["the two candidate runners' medians differ 31.50x"]}},
      "work":{"flops":2e9,"bytes":4e6,"dtype":"bfloat16","cached":true}}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->speedup_ci_low, 1.2);
  EXPECT_EQ(m->speedup_ci_high, 1.3);
  const TimingHealth& h = m->timing_health;
  EXPECT_TRUE(h.present);
  EXPECT_FALSE(h.ok);
  EXPECT_FALSE(h.machine);
  EXPECT_EQ(h.judge_reference_ns, 1000.0);
  EXPECT_EQ(h.reference_runner_ratio, 1.02);
  EXPECT_EQ(h.candidate_runner_ratio, 31.5);
  EXPECT_EQ(h.reference_over_judge, 0.9);
  EXPECT_EQ(h.reasons,
            std::vector<std::string>{"the two candidate runners' medians differ 31.50x"});
  const CountedWork& w = m->counted_work;
  EXPECT_TRUE(w.present);
  EXPECT_EQ(w.flops, 2e9);
  EXPECT_EQ(w.bytes, 4e6);
  EXPECT_EQ(w.dtype, "bfloat16");
  EXPECT_TRUE(w.cached);
  EXPECT_EQ(w.error, "");
  // The struct and the schema name the same fields: every field of the
  // schema was set above, and each is read (a field the generator dropped
  // would keep its default and fail one of the checks above).
  for (const auto& s : schema.at("measure_result").at("structs")) {
    const std::string name = s.at("name");
    const auto& part =
        name == "TimingHealth" ? m->evidence.at("timing").at("health") : m->evidence.at("work");
    for (const auto& f : s.at("fields"))
      if (f.at("name") != "error") EXPECT_TRUE(part.contains(f.at("name"))) << name << "." << f;
  }

  // Absent: trusted, nothing counted, the schema's defaults.
  auto bare = parse_measure(R"({"verdict":"incorrect","evidence":{"work":{"error":"no count"}}})");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->timing_health.present);
  EXPECT_TRUE(bare->timing_health.ok);
  EXPECT_FALSE(bare->counted_work.flops);
  EXPECT_EQ(bare->counted_work.dtype, "float32");
  EXPECT_EQ(bare->counted_work.error, "no count");
}

// One place turns a measurement's timing health into an outcome
// (timing_outcome): kept when trusted, measured again while measurements are
// left, and at the last the host's fault or impossible_timing by the side the
// judge found; a verdict other than ok stands.
TEST(JobProtocol, TimingOutcomeIsDecidedInOnePlace) {
  auto with = [](const char* verdict, const char* health) {
    auto m = parse_measure(std::string(R"({"verdict":")") + verdict +
                           R"(","evidence":{"timing":{"health":)" + health + "}}}");
    EXPECT_TRUE(m);
    return *m;
  };
  const auto trusted = with("ok", R"({"ok":true,"machine":false,"reasons":[]})");
  const auto host = with("ok", R"({"ok":false,"machine":true,"reasons":["ref slow"]})");
  const auto cand = with("ok", R"({"ok":false,"machine":false,"reasons":["cand apart"]})");
  const auto wrong = with("incorrect", R"({"ok":false,"machine":false,"reasons":["x"]})");
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(timing_outcome(trusted, n, 3), TimingOutcome::keep);
  for (int n = 1; n < 3; ++n) {
    EXPECT_EQ(timing_outcome(host, n, 3), TimingOutcome::measure_again) << n;
    EXPECT_EQ(timing_outcome(cand, n, 3), TimingOutcome::measure_again) << n;
    EXPECT_EQ(timing_outcome(wrong, n, 3), TimingOutcome::measure_again) << n;
  }
  EXPECT_EQ(timing_outcome(host, 3, 3), TimingOutcome::host_fault);
  EXPECT_EQ(timing_outcome(cand, 3, 3), TimingOutcome::impossible_timing);
  EXPECT_EQ(timing_outcome(wrong, 3, 3), TimingOutcome::keep);
  EXPECT_TRUE(host.timing_distrust_is_machine());
  EXPECT_FALSE(cand.timing_distrust_is_machine());
}

TEST(JobProtocol, RulesResultsParse) {
  auto r = parse_rules(R"J({"ok":false,"violations":[{"rule":"dunder","line":3,"message":"m"}],
                           "language":"triton","protections":["a"],
                           "load_inline":[{"entry":{"name":"e"},"key":"k1","lineno":5},
                                          {"unresolved":"f(x)","lineno":9}],
                           "glue_probe":{"entry":{"name":"g"},"key":"kg"}})J");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ok);
  ASSERT_EQ(r->violations.size(), 1u);
  EXPECT_EQ(r->violations[0].rule, "dunder");
  EXPECT_EQ(r->violations[0].line, 3);
  ASSERT_EQ(r->load_inline.size(), 2u);
  EXPECT_EQ(r->load_inline[0].name(), "e");
  EXPECT_EQ(r->load_inline[1].unresolved, "f(x)");
  ASSERT_TRUE(r->glue_probe);
  EXPECT_EQ(r->glue_probe->key, "kg");
  EXPECT_EQ(r->language, CandidateLanguage::triton);
  for (auto [word, lang] :
       {std::pair{"cuda", CandidateLanguage::cuda}, std::pair{"cpp", CandidateLanguage::cpp},
        std::pair{"torch", CandidateLanguage::torch},
        std::pair{"fortran", CandidateLanguage::unknown}}) {
    auto l = parse_rules(std::string(R"({"ok":true,"language":")") + word + R"("})");
    ASSERT_TRUE(l) << word;
    EXPECT_EQ(l->language, lang) << word;
  }
  EXPECT_EQ(parse_rules(R"({"ok":true})")->language, CandidateLanguage::unknown);
  auto err = parse_rules(R"({"error":"rule checker failed","detail":"tb"})");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->error, "rule checker failed");
  EXPECT_FALSE(parse_rules("not json"));
}

// A real worker, a job of another protocol version: refused, with the reason.
TEST(JobProtocol, CompileManifestsParseAndUnknownStatusesAreErrors) {
  auto ok = parse_manifest(R"({"status":"ok","module":"m","so":"m.so","compile_s":2.5})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->status, CompileStatus::ok);
  EXPECT_EQ(ok->so, "m.so");
  auto bad = parse_manifest(R"({"status":"compile_error","log":"error: x"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, CompileStatus::compile_error);
  auto sym = parse_manifest(
      R"({"status":"rule_violation","violations":[{"rule":"symbols","line":0,"message":"dlopen"}]})");
  ASSERT_TRUE(sym);
  EXPECT_EQ(sym->status, CompileStatus::rule_violation);
  ASSERT_EQ(sym->violations.size(), 1u);
  auto missing = parse_manifest(R"({"module":"m"})");  // ended before writing a status
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, CompileStatus::compile_error);
  auto unknown = parse_manifest(R"({"status":"fine"})");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("fine"), std::string::npos);
  EXPECT_FALSE(parse_manifest("not json"));
}

TEST(JobProtocol, TheWorkerRefusesAnotherVersion) {
  // Under /var/tmp: jobs see a private /tmp (as in the evaluator's cache).
  std::string root = "/var/tmp/korch-protocol-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  struct Cleanup {
    std::string p;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } cleanup{root};
  const std::string run = root + "/run", jobs = root + "/jobs";
  std::filesystem::create_directories(run);
  std::filesystem::create_directories(jobs + "/j1");
  std::filesystem::permissions(root, std::filesystem::perms::owner_all |
                                         std::filesystem::perms::others_exec |
                                         std::filesystem::perms::group_exec);
  auto z = Zygote::start(find_worker_path(), run);
  ASSERT_TRUE(z) << z.error().message;
  json job = rules_job(Settings{}, "import torch\n");
  job["protocol"] = k_version + 99;
  ASSERT_TRUE(write_file_atomic(jobs + "/j1/job.json", job.dump()));
  JobOutcome o = (*z)->run(JobRole::rules, jobs + "/j1", Spawn{}.dump(), std::nullopt, 60);
  auto r = parse_rules(o.result_json);
  ASSERT_TRUE(r) << o.worker_log;
  EXPECT_NE(r->error.find("job protocol " + std::to_string(k_version + 99)), std::string::npos)
      << r->error;
  // The same job at this version is checked normally.
  job["protocol"] = k_version;
  ASSERT_TRUE(write_file_atomic(jobs + "/j1/job.json", job.dump()));
  o = (*z)->run(JobRole::rules, jobs + "/j1", Spawn{}.dump(), std::nullopt, 60);
  r = parse_rules(o.result_json);
  ASSERT_TRUE(r) << o.worker_log;
  EXPECT_TRUE(r->error.empty()) << r->error;
  (*z)->stop();
}

}  // namespace
}  // namespace korch::evaluator::protocol
