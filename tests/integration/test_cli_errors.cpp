// Bad input gets one clear line and a non-zero exit, and nothing already
// stored is lost (issue 2): real `korch` processes, real files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "tests/integration/campaign_fixture.hpp"
#include "util/sha256.hpp"

namespace korch::testing {
namespace {

struct Outcome {
  int rc = 0;
  std::string err;
};

// Runs korch; as root, optionally as uid nobody (root ignores file modes).
Outcome korch(const std::vector<std::string>& args, const std::string& dir,
              bool as_nobody = false) {
  std::vector<std::string> argv = {KORCH_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = dir + "/korch.out";
  auto err = dir + "/korch.err";
  std::remove(out.c_str());
  std::remove(err.c_str());
  auto p =
      Process::start(argv, out, err, {}, as_nobody ? std::optional<uid_t>(65534) : std::nullopt);
  int rc = p.wait();
  return {rc, slurp(err)};
}

// The last non-empty line of stderr (progress and banners come before it).
std::string last_line(const std::string& text) {
  auto end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  auto start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    m_d = m_dir.path().string();
    ::chmod(m_d.c_str(), 0777);
    ASSERT_TRUE(m_llm.start(m_d, {"--script", "kernel"}));
  }
  std::string good_toml(const std::string& extra_top = "", const std::string& tasks_dir = "") {
    std::ostringstream s;
    s << "name = \"errors\"\ndb_path = \"" << m_d
      << "/k.db\"\nmax_turns = 2\nlog_level = \"warn\"\n"
      << extra_top << "[tasks]\nkernelbench_dir = \""
      << (tasks_dir.empty() ? std::string(KORCH_EXAMPLES_DIR) + "/tasks" : tasks_dir)
      << "\"\n[evaluator]\nmode = \"mock\"\n"
      << "[[models]]\nid = \"m1\"\nbase_url = \"" << m_llm.base_url() << "\"\nmodel = \"fake\"\n";
    return s.str();
  }
  std::string write(const std::string& name, const std::string& text) {
    auto p = m_d + "/" + name;
    write_text(p, text);
    ::chmod(p.c_str(), 0644);
    return p;
  }
  // A finished campaign in k.db; returns its export.
  std::string populate() {
    auto toml = write("good.toml", good_toml());
    auto r = korch({"run", toml, "--no-progress"}, m_d);
    EXPECT_EQ(r.rc, 0) << r.err;
    return export_of(toml);
  }
  std::string export_of(const std::string& toml) {
    auto [rc, out] = run_capture({KORCH_BIN, "export", toml, "--format", "jsonl"}, m_d);
    EXPECT_EQ(rc, 0) << out;
    return out;
  }

  TempDir m_dir;
  std::string m_d;
  FakeLlmProcess m_llm;
};

TEST_F(CliErrors, MalformedTomlNamesFileAndLine) {
  auto stored = populate();
  auto toml = write("bad.toml", "name = \"errors\"\nmax_turns = [1,\n");
  auto r = korch({"run", toml}, m_d);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(toml + ":"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(export_of(write("good.toml", good_toml())), stored);
}

TEST_F(CliErrors, UnknownKeyIsRefusedWithASuggestion) {
  auto toml = write("typo.toml", good_toml("max_turn = 3\n"));
  auto r = korch({"run", toml}, m_d);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(":5: unknown key 'max_turn'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_turns"), std::string::npos) << r.err;
}

TEST_F(CliErrors, MissingTaskDirectory) {
  auto toml = write("nodir.toml", good_toml("", m_d + "/no-such-dir"));
  auto r = korch({"run", toml}, m_d);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no-such-dir"), std::string::npos) << r.err;
}

TEST_F(CliErrors, UnreachableLlmEndpoint) {
  auto text = good_toml();
  auto pos = text.find("http://127.0.0.1:");
  text.replace(pos, text.find("/v1", pos) - pos, "http://127.0.0.1:9");
  auto toml = write("down.toml", text);
  auto r = korch({"run", toml, "--no-progress"}, m_d);
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(last_line(r.err).find("unreachable"), std::string::npos) << r.err;
  EXPECT_NE(last_line(r.err).find("127.0.0.1:9"), std::string::npos) << r.err;
}

TEST_F(CliErrors, CorruptDatabaseIsRefusedAndLeftAlone) {
  auto db = m_d + "/k.db";
  write_text(db, std::string(8192, 'x'));
  auto before = sha256_hex(slurp(db));
  auto r = korch({"run", write("good.toml", good_toml()), "--no-progress"}, m_d);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(last_line(r.err).find(db), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(sha256_hex(slurp(db)), before);
}

TEST_F(CliErrors, ReadOnlyDatabaseIsRefusedAndNothingStoredIsLost) {
  auto stored = populate();
  auto db = m_d + "/k.db";
  ASSERT_EQ(::chmod(db.c_str(), 0444), 0);
  auto before = sha256_hex(slurp(db));
  auto r = korch({"run", m_d + "/good.toml", "--no-progress"}, m_d, /*as_nobody=*/true);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(last_line(r.err).find("k.db"), std::string::npos) << r.err;
  EXPECT_EQ(sha256_hex(slurp(db)), before);
  // Still readable, and everything is still there.
  EXPECT_EQ(export_of(m_d + "/good.toml"), stored);
}

TEST_F(CliErrors, SecondRunOfADoneCampaignChangesNothing) {
  auto stored = populate();
  auto r = korch({"run", m_d + "/good.toml", "--no-progress"}, m_d);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(export_of(m_d + "/good.toml"), stored);
}

TEST_F(CliErrors, UsageErrorsExitTwo) {
  EXPECT_EQ(korch({}, m_d).rc, 2);
  EXPECT_EQ(korch({"frobnicate"}, m_d).rc, 2);
  EXPECT_EQ(korch({"export", "--db", m_d + "/k.db", "--format", "xml"}, m_d).rc, 2);
  EXPECT_EQ(korch({"--help"}, m_d).rc, 0);
}

// A malformed number is bad input named by its flag (exit 2), not an
// "internal error" from std::stod; nothing is evaluated.
TEST_F(CliErrors, MalformedNumericFlagsNameTheFlag) {
  std::filesystem::create_directories(m_d + "/kb/level1");
  const std::string task = m_d + "/kb/level1/1_Identity.py", code = m_d + "/c.py";
  write_text(task,
             "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
             "        return x\ndef get_inputs():\n    return [torch.ones(2)]\n"
             "def get_init_inputs():\n    return []\n");
  write_text(code,
             "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
             "        return x\n");
  const std::vector<std::pair<std::string, std::string>> bad = {{"--timeout", "abc"},
                                                                {"--timeout", "-1"},
                                                                {"--timeout", "5s"},
                                                                {"--memory-budget-mb", "1.5"},
                                                                {"--seed", "-3"}};
  for (auto& [flag, value] : bad) {
    auto r = korch({"eval", "--task", task, "--code", code, flag, value}, m_d);
    EXPECT_EQ(r.rc, 2) << flag << " " << value << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  auto v = korch({"tasks", "validate", m_d + "/kb", "--levels", "1", "--timeout", "soon"}, m_d);
  EXPECT_EQ(v.rc, 2) << v.err;
  EXPECT_NE(v.err.find("--timeout"), std::string::npos) << v.err;
}

// Every subcommand that `korch --help` lists answers `--help` and `-h` with
// its usage on stdout and exit 0, and does nothing else: no database or
// other file appears in the working directory, no port is taken (`serve
// --help` used to start a daemon on 8765 and create korch.db here).
TEST_F(CliErrors, HelpOfEverySubcommandPrintsAndChangesNothing) {
  auto [rc, usage] = run_capture({KORCH_BIN, "--help"}, m_d);
  ASSERT_EQ(rc, 0);
  // "  korch run CAMPAIGN.toml ..." -> {"run"}; "  korch tasks list DIR" -> {"tasks", "list"}.
  std::vector<std::vector<std::string>> commands;
  std::istringstream lines(usage);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  korch ", 0) != 0) continue;
    std::istringstream words(line.substr(8));
    std::string first, second;
    words >> first >> second;
    first.erase(std::remove(first.begin(), first.end(), ','), first.end());
    if (first == "help") continue;
    commands.push_back({first});
    if (!second.empty() && std::islower(static_cast<unsigned char>(second[0])) &&
        second.find('.') == std::string::npos)
      commands.push_back({first, second});
  }
  ASSERT_GE(commands.size(), 12u) << usage;
  auto run_dir = m_d + "/cwd";
  std::filesystem::create_directories(run_dir);
  for (auto& cmd : commands) {
    for (const char* flag : {"--help", "-h"}) {
      // Run inside run_dir, so that a file it created would show there.
      std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec " KORCH_BIN " \"$@\"",
                                       run_dir};
      argv.insert(argv.end(), cmd.begin(), cmd.end());
      argv.push_back(flag);
      std::string what = cmd[0] + (cmd.size() > 1 ? " " + cmd[1] : "") + " " + flag;
      auto out = m_d + "/help.out", err = m_d + "/help.err";
      auto p = Process::start(argv, out, err, {{"KORCH_API_TOKEN", "short"}});
      auto code = p.wait_for(std::chrono::seconds(20));
      if (!code) {
        p.signal(SIGKILL);
        p.wait();
      }
      ASSERT_TRUE(code.has_value()) << what << " did not exit: " << slurp(err);
      EXPECT_EQ(*code, 0) << what << ": " << slurp(err);
      auto text = slurp(out);
      EXPECT_NE(text.find("Usage:\n  korch " + cmd[0]), std::string::npos) << what << ": " << text;
      EXPECT_EQ(slurp(err), "") << what;
      EXPECT_TRUE(std::filesystem::is_empty(run_dir)) << what << " wrote into its directory";
    }
  }
  // `korch help serve` is the same text as `korch serve --help`, and names its keys.
  auto [hrc, help_serve] = run_capture({KORCH_BIN, "help", "serve"}, m_d);
  EXPECT_EQ(hrc, 0);
  EXPECT_NE(help_serve.find("--env-listen"), std::string::npos) << help_serve;
  EXPECT_EQ(help_serve, run_capture({KORCH_BIN, "serve", "--help"}, m_d).second);
}

}  // namespace
}  // namespace korch::testing
