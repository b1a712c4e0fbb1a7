// `korch lint` as a real process on both corpora: every realistic correct
// candidate passes, every rule-level hack fails with its expected rule, and
// bad input gets exit 2 with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::testing {
namespace {

namespace fs = std::filesystem;

struct LintRun {
  int rc = 0;
  std::string out;
  std::string err;
};

class Lint : public ::testing::Test {
 protected:
  LintRun korch_lint(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KORCH_BIN, "lint"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out = m_dir.file("lint-" + std::to_string(m_runs) + ".out").string();
    const std::string err = m_dir.file("lint-" + std::to_string(m_runs++) + ".err").string();
    auto p = Process::start(argv, out, err);
    LintRun r;
    r.rc = p.wait();
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = m_dir.file(name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  TempDir m_dir;
  int m_runs = 0;
};

// `# key: value` from a corpus file's leading comment block ("" if absent).
std::string corpus_header(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  const std::string prefix = "# " + key + ":";
  while (std::getline(in, line) && line.rfind("#", 0) == 0) {
    if (line.rfind(prefix, 0) == 0) {
      std::string v = line.substr(prefix.size());
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
  }
  return "";
}

std::vector<fs::path> corpus_files(const std::string& sub) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(KORCH_CORPUS_DIR) / sub)) {
    if (e.path().extension() == ".py") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

TEST_F(Lint, EveryRealisticCandidatePasses) {
  std::map<std::string, std::vector<std::string>> by_tolerance;
  for (const auto& f : corpus_files("realistic")) {
    std::string tol = corpus_header(f, "tolerance");
    by_tolerance[tol.empty() ? "strict" : tol].push_back(f.string());
  }
  size_t checked = 0;
  for (const auto& [tolerance, files] : by_tolerance) {
    std::vector<std::string> args = {"--json", "--tolerance", tolerance};
    args.insert(args.end(), files.begin(), files.end());
    LintRun r = korch_lint(args);
    EXPECT_EQ(r.rc, 0) << r.out.substr(0, 2000) << r.err;
    auto records = json_lines(r.out);
    ASSERT_EQ(records.size(), files.size()) << r.out.substr(0, 2000);
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i]["file"], files[i]);
      EXPECT_TRUE(records[i]["ok"].get<bool>()) << records[i].dump(1);
      EXPECT_TRUE(records[i]["violations"].empty()) << records[i].dump(1);
    }
    checked += records.size();
  }
  EXPECT_GE(checked, 60u);
}

TEST_F(Lint, EveryRuleLevelHackFailsWithItsRule) {
  std::vector<std::string> files;
  std::vector<std::string> rules;
  for (const auto& f : corpus_files("hacks")) {
    const std::string expect = corpus_header(f, "expect");
    if (expect.rfind("rule_violation ", 0) != 0) continue;  // caught later: sandbox or judge
    // native_symbol is decided on the compiled library, which lint never
    // builds (docs/rules.md): such a hack passes lint, and the symbol check
    // itself is tested in test_rules.py and test_cpu_evaluator.
    if (expect == "rule_violation native_symbol") continue;
    files.push_back(f.string());
    rules.push_back(expect.substr(std::string("rule_violation ").size()));
  }
  ASSERT_GE(files.size(), 20u);
  std::vector<std::string> args = {"--json"};
  args.insert(args.end(), files.begin(), files.end());
  LintRun r = korch_lint(args);
  EXPECT_EQ(r.rc, 1) << r.err;
  auto records = json_lines(r.out);
  ASSERT_EQ(records.size(), files.size());
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(files[i]);
    EXPECT_FALSE(records[i]["ok"].get<bool>());
    bool found = false;
    for (const auto& v : records[i]["violations"]) {
      EXPECT_TRUE(v.contains("rule") && v.contains("line") && v.contains("message"));
      EXPECT_TRUE(v["line"].is_number_integer());
      EXPECT_NE(v["message"].get<std::string>().find("Fix: "), std::string::npos) << v.dump();
      found |= v["rule"] == rules[i];
    }
    EXPECT_TRUE(found) << "expected rule " << rules[i] << " in " << records[i].dump(1);
  }
}

TEST_F(Lint, HumanOutputNamesFileLineRuleAndFix) {
  const std::string hack = (fs::path(KORCH_CORPUS_DIR) / "hacks" / "dunder_escape.py").string();
  const std::string good = (fs::path(KORCH_CORPUS_DIR) / "good" / "cpp_relu.py").string();
  LintRun r = korch_lint({good, hack});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(good + ": ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(hack + ":6: [interpreter_internals] "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n    fix: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 files checked"), std::string::npos) << r.out;

  LintRun ok = korch_lint({good});
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("all pass"), std::string::npos) << ok.out;
}

TEST_F(Lint, PolicyFlagsReachTheRules) {
  const std::string tf32 =
      (fs::path(KORCH_CORPUS_DIR) / "realistic" / "l1_1_matmul_triton_tf32.py").string();
  LintRun strict = korch_lint({"--json", tf32});
  EXPECT_EQ(strict.rc, 1);
  EXPECT_NE(strict.out.find("\"precision_downgrade\""), std::string::npos) << strict.out;
  EXPECT_EQ(korch_lint({"--tolerance", "tf32", tf32}).rc, 0);

  const std::string uses_torch = (fs::path(KORCH_CORPUS_DIR) / "good" / "torch_add.py").string();
  EXPECT_EQ(korch_lint({"--torch-ops", "forbid", uses_torch}).rc,
            0);  // enforced at run time, not statically
}

TEST_F(Lint, BadPathExitsTwoWithAClearMessage) {
  const std::string good = (fs::path(KORCH_CORPUS_DIR) / "good" / "cpp_relu.py").string();
  const std::string missing = m_dir.file("no_such_candidate.py").string();
  LintRun r = korch_lint({good, missing});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cannot read '" + missing + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  LintRun dir = korch_lint({m_dir.path().string()});
  EXPECT_EQ(dir.rc, 2);
  EXPECT_NE(dir.err.find("is a directory"), std::string::npos) << dir.err;
}

TEST_F(Lint, UsageErrorsExitTwo) {
  const std::string good = (fs::path(KORCH_CORPUS_DIR) / "good" / "cpp_relu.py").string();
  for (const auto& args : std::vector<std::vector<std::string>>{{},
                                                                {"--tolerance", "fast", good},
                                                                {"--torch-ops", "maybe", good},
                                                                {"--bogus", "1", good}}) {
    LintRun r = korch_lint(args);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.err.find("usage: korch lint FILE..."), std::string::npos) << r.err;
  }
}

TEST_F(Lint, OddFilesAreLintedNotMisread) {
  // Not UTF-8: a source_encoding violation, not a crash.
  const std::string latin1 = write("latin1.py", "import torch\nname = '\xe9t\xe9'\n");
  LintRun enc = korch_lint({"--json", latin1});
  EXPECT_EQ(enc.rc, 1) << enc.err;
  EXPECT_NE(enc.out.find("\"source_encoding\""), std::string::npos) << enc.out;
  // Not Python: a syntax_error violation with its line.
  const std::string broken = write("broken.py", "import torch\n\ndef f(:\n    pass\n");
  LintRun syn = korch_lint({"--json", broken});
  EXPECT_EQ(syn.rc, 1);
  auto rec = json_lines(syn.out);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0]["violations"][0]["rule"], "syntax_error");
  EXPECT_EQ(rec[0]["violations"][0]["line"], 3);
  // A name that looks like a flag is still a file.
  const fs::path cwd = fs::current_path();
  fs::current_path(m_dir.path());
  std::ifstream src(fs::path(KORCH_CORPUS_DIR) / "good" / "cpp_relu.py");
  std::ofstream("-dash.py") << src.rdbuf();
  LintRun dash = korch_lint({"-dash.py"});
  fs::current_path(cwd);
  EXPECT_EQ(dash.rc, 0) << dash.out << dash.err;
  EXPECT_NE(dash.out.find("-dash.py: ok"), std::string::npos) << dash.out;
}

}  // namespace
}  // namespace korch::testing
