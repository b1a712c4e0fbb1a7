// Tests of util/process: real children (/bin/sh), real signals, real pipes.
#include "util/process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.hpp"

namespace korch::process {
namespace {

using namespace std::chrono_literals;

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RunCapture, CapturesStdoutAndTheExitCode) {
  auto r = run_capture({"/bin/sh", "-c", "printf 'a b\\n'; exit 3"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "a b\n");
  EXPECT_EQ(r->status, 3);
  EXPECT_FALSE(r->timed_out);
}

TEST(RunCapture, LooksTheProgramUpInPath) {
  auto r = run_capture({"sh", "-c", "echo found"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "found\n");
}

TEST(RunCapture, AMissingProgramIsAnError) {
  auto r = run_capture({"/no/such/program"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot start /no/such/program"), std::string::npos)
      << r.error().message;
}

TEST(RunCapture, SetsAndUnsetsEnvironmentVariables) {
  ::setenv("KORCH_PROCESS_TEST_UNSET", "present", 1);
  SpawnOptions o;
  o.env = {{"KORCH_PROCESS_TEST_SET", "value 1"}, {"KORCH_PROCESS_TEST_UNSET", ""}};
  auto r = run_capture(
      {"/bin/sh", "-c", "echo \"$KORCH_PROCESS_TEST_SET|${KORCH_PROCESS_TEST_UNSET-gone}\""}, o);
  ::unsetenv("KORCH_PROCESS_TEST_UNSET");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "value 1|gone\n");
}

TEST(RunCapture, KillsAChildThatOutlivesItsTimeout) {
  const auto start = std::chrono::steady_clock::now();
  auto r = run_capture({"/bin/sh", "-c", "echo started; exec sleep 30"}, {}, 200ms);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->status, 128 + SIGKILL);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Child, WritesOutputToFilesAndReportsSignals) {
  korch::testing::TempDir dir;
  SpawnOptions o;
  o.stdout_path = dir.file("out").string();
  o.stderr_path = dir.file("err").string();
  o.own_process_group = true;
  auto child = Child::spawn({"/bin/sh", "-c", "echo to-out; echo to-err >&2; exec sleep 30"}, o);
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->wait_for(100ms), std::nullopt);  // still running
  child->signal(SIGTERM);
  EXPECT_EQ(child->wait(), 128 + SIGTERM);
  EXPECT_EQ(child->wait(), 128 + SIGTERM);  // reaped once, remembered
  EXPECT_EQ(read(dir.file("out")), "to-out\n");
  EXPECT_EQ(read(dir.file("err")), "to-err\n");
}

TEST(Child, StartsWithDefaultSignalDispositions) {
  // A parent that ignores SIGINT (a background job) must not pass that on.
  auto old = ::signal(SIGINT, SIG_IGN);
  auto child = Child::spawn({"/bin/sh", "-c", "exec sleep 30"});
  ::signal(SIGINT, old);
  ASSERT_TRUE(child) << child.error().message;
  child->signal(SIGINT);
  auto status = child->wait_for(5s);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGINT);
}

TEST(Child, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid = 0;
  {
    auto child = Child::spawn({"/bin/sh", "-c", "exec sleep 30"});
    ASSERT_TRUE(child) << child.error().message;
    pid = child->pid();
    ASSERT_GT(pid, 0);
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the child is still there";
}

}  // namespace
}  // namespace korch::process
