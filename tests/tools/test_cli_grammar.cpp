// The command line's one grammar (tools/korch/grammar.cpp), driven by its
// own table: `korch help --grammar` lists every command and flag, and every
// command gets the same checks, so a command or flag added to the table is
// covered here without a new test. Real `korch` processes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::testing {
namespace {

struct KorchRun {
  int rc = 0;
  std::string out, err;
};

KorchRun korch(const std::vector<std::string>& args) {
  static TempDir dir;
  static int n = 0;
  std::vector<std::string> argv = {KORCH_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = dir.file("k" + std::to_string(n) + ".out").string();
  const std::string err = dir.file("k" + std::to_string(n++) + ".err").string();
  auto p = Process::start(argv, out, err);
  KorchRun r;
  r.rc = p.wait();
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct Command {
  std::string name;
  nlohmann::json flags;
};

// Its name, in test names and messages.
void PrintTo(const Command& c, std::ostream* os) { *os << c.name; }

// The table, as korch prints it (read once, when the tests are listed).
std::vector<Command> table() {
  auto r = korch({"help", "--grammar"});
  std::vector<Command> out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (r.rc != 0 || !j.is_array()) return out;
  for (auto& c : j) out.push_back({c["command"], c["flags"]});
  return out;
}

std::string test_name(const ::testing::TestParamInfo<Command>& info) {
  std::string n = info.param.name;
  for (auto& c : n)
    if (c == ' ') c = '_';
  return n;
}

class EveryCommand : public ::testing::TestWithParam<Command> {
 protected:
  // `korch <command words> args...`
  KorchRun run(const std::vector<std::string>& args) {
    auto argv = words(GetParam().name);
    argv.insert(argv.end(), args.begin(), args.end());
    return korch(argv);
  }
  std::vector<std::string> flag_names() const {
    std::vector<std::string> out;
    for (auto& f : GetParam().flags) out.push_back(f["name"]);
    return out;
  }
};

TEST(CliGrammar, TheTableListsEveryCommand) {
  auto t = table();
  ASSERT_GE(t.size(), 13u);
  std::vector<std::string> names;
  for (auto& c : t) names.push_back(c.name);
  for (const char* expected :
       {"run", "resume", "status", "export", "report", "config show", "store copy", "tasks list",
        "tasks validate", "eval", "lint", "serve", "worker"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
}

// An unknown flag: exit 2, named, with the flags the command takes; nothing ran.
TEST_P(EveryCommand, UnknownFlagExitsTwoAndListsTheFlags) {
  auto r = run({"--zzz-no-such-flag", "1"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("unknown flag --zzz-no-such-flag"), std::string::npos) << r.err;
  for (auto& f : flag_names()) EXPECT_NE(r.err.find(f), std::string::npos) << f << ": " << r.err;
  EXPECT_EQ(r.out, "");
}

// Each flag typed with one letter doubled: exit 2 and "did you mean" it.
TEST_P(EveryCommand, TypoedFlagExitsTwoWithDidYouMean) {
  auto names = flag_names();
  for (auto& f : names) {
    std::string typo = f + f.back();
    if (std::find(names.begin(), names.end(), typo) != names.end()) continue;
    auto r = run({typo, "x"});
    EXPECT_EQ(r.rc, 2) << typo << ": " << r.err;
    EXPECT_NE(r.err.find("unknown flag " + typo + " (did you mean '" + f + "'?)"),
              std::string::npos)
        << r.err;
  }
}

// A value outside a flag's choices, a number that is not one, a --set that
// is not KEY=VALUE: exit 2, naming the flag and what it takes.
TEST_P(EveryCommand, BadValueExitsTwoNamingTheChoices) {
  int checked = 0;
  for (auto& f : GetParam().flags) {
    const std::string name = f["name"], type = f["type"];
    KorchRun r;
    if (type == "choice") {
      // One letter off the first choice: the did-you-mean names it.
      std::string first = f["choices"][0];
      std::string near = first + "x";
      r = run({name, near});
      EXPECT_NE(r.err.find("did you mean '" + first + "'"), std::string::npos) << r.err;
      for (auto& c : f["choices"])
        EXPECT_NE(r.err.find(c.get<std::string>()), std::string::npos) << c << ": " << r.err;
    } else if (type == "whole" || type == "number") {
      r = run({name, "abc"});
      EXPECT_NE(r.err.find(type == "whole" ? "a whole number" : "a number"), std::string::npos)
          << r.err;
    } else if (type == "setting") {
      r = run({name, "no-equals-sign"});
      EXPECT_NE(r.err.find("KEY=VALUE"), std::string::npos) << r.err;
    } else if (type == "on_off") {
      r = run({name + "=yes"});
      EXPECT_NE(r.err.find("takes no value"), std::string::npos) << r.err;
    } else {
      r = run({name});  // a text flag without its value
      EXPECT_NE(r.err.find("needs a value"), std::string::npos) << r.err;
    }
    EXPECT_EQ(r.rc, 2) << name << " (" << type << "): " << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(GetParam().flags.size()));
}

// --help prints the flags of the table, and does nothing else.
TEST_P(EveryCommand, HelpListsEveryFlag) {
  auto r = run({"--help"});
  EXPECT_EQ(r.rc, 0) << r.err;
  for (auto& f : flag_names()) EXPECT_NE(r.out.find(f), std::string::npos) << f << ": " << r.out;
}

INSTANTIATE_TEST_SUITE_P(Table, EveryCommand, ::testing::ValuesIn(table()), test_name);

TEST(CliGrammar, EveryCommandWithSettingsTakesSetAndEveryStoreCommandTakesDb) {
  for (auto& c : table()) {
    std::vector<std::string> names;
    for (auto& f : c.flags) names.push_back(f["name"]);
    auto has = [&](const char* n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    for (const char* cmd : {"run", "resume", "status", "export", "report", "serve", "worker"}) {
      if (c.name == cmd) {
        EXPECT_TRUE(has("--db")) << c.name;
      }
    }
    for (const char* cmd :
         {"run", "resume", "status", "export", "report", "config show", "serve", "worker"}) {
      if (c.name == cmd) {
        EXPECT_TRUE(has("--set")) << c.name;
      }
    }
  }
}

TEST(CliGrammar, UnknownCommandsAndSubcommandsGetADidYouMean) {
  auto r = korch({"serv"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown command 'serv' (did you mean 'serve'?)"), std::string::npos)
      << r.err;
  r = korch({"config", "shwo", "x.toml"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("did you mean 'show'?"), std::string::npos) << r.err;
  r = korch({"tasks", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("korch tasks list"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("korch tasks validate"), std::string::npos) << r.out;
}

// The examples, each once more by name.
TEST(CliGrammar, TheReportedMistakesAreRefused) {
  auto r = korch({"report", "--fromat", "json"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("did you mean '--format'?"), std::string::npos) << r.err;
  r = korch({"worker", "--bogus", "1"});
  EXPECT_EQ(r.rc, 2);
  r = korch({"run", "x.toml", "--no-progres"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("did you mean '--no-progress'?"), std::string::npos) << r.err;
  r = korch({"status", "--dbb", "X"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("did you mean '--db'?"), std::string::npos) << r.err;
  r = korch({"serve", "--evaluator-mode", "mokc"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("mock, cpu, gpu"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'mock'?"), std::string::npos) << r.err;
  // --set on serve: the serve keys, checked with the same words.
  r = korch({"serve", "--set", "evaluator.mode=mokc", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("did you mean 'mock'?"), std::string::npos) << r.err;
  r = korch({"serve", "--set", "evaluator.mdoe=mock", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown key 'evaluator.mdoe' (did you mean 'evaluator.mode'?)"),
            std::string::npos)
      << r.err;
}

// docs/cli.md is the table's own text (`korch help --markdown`).
TEST(CliGrammar, DocsAreGeneratedFromTheTable) {
  auto r = korch({"help", "--markdown"});
  ASSERT_EQ(r.rc, 0);
  std::ifstream in(KORCH_SOURCE_DIR "/docs/cli.md", std::ios::binary);
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), r.out) << "regenerate: build/bin/korch help --markdown > docs/cli.md";
}

}  // namespace
}  // namespace korch::testing
