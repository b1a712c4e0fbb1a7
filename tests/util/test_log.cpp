// util/log.hpp: the level is a run-time choice. A KLOG_DEBUG line reaches a
// capturing sink once the level is set to debug at run time (it used to be
// compiled out), and a line below the level neither appears nor evaluates
// its arguments.
#include "util/log.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.hpp"
#include "util/fs.hpp"

namespace korch::log {
namespace {

// Installs a default logger writing into a string; restores the previous
// logger and level afterwards.
class CapturedLog : public ::testing::Test {
 protected:
  void SetUp() override {
    m_previous = spdlog::default_logger();
    m_previous_level = spdlog::get_level();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(m_out);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  void TearDown() override {
    spdlog::set_default_logger(m_previous);
    spdlog::set_level(m_previous_level);
  }
  std::string text() const { return m_out.str(); }

  std::ostringstream m_out;
  std::shared_ptr<spdlog::logger> m_previous;
  spdlog::level::level_enum m_previous_level = spdlog::level::info;
};

TEST_F(CapturedLog, DebugLineReachesSinkAfterLevelSetAtRunTime) {
  set_level("info");
  KLOG_DEBUG("[llm m] hidden {}", 1);
  EXPECT_EQ(text(), "");
  set_level("debug");
  KLOG_DEBUG("[llm m] request {} attempt {} failed", "r-1", 2);
  EXPECT_EQ(text(), "debug [llm m] request r-1 attempt 2 failed\n");
}

TEST_F(CapturedLog, LineBelowLevelDoesNotEvaluateItsArguments) {
  set_level("warn");
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  KLOG_DEBUG("{}", count());
  KLOG_INFO("{}", count());
  EXPECT_EQ(evaluated, 0);
  KLOG_WARN("{}", count());
  EXPECT_EQ(evaluated, 1);
  EXPECT_EQ(text(), "warning 1\n");
}

TEST_F(CapturedLog, EveryMacroWritesAtItsLevel) {
  set_level("trace");
  KLOG_DEBUG("d");
  KLOG_INFO("i");
  KLOG_WARN("w");
  KLOG_ERROR("e");
  EXPECT_EQ(text(), "debug d\ninfo i\nwarning w\nerror e\n");
}

TEST_F(CapturedLog, EnabledFollowsTheLevel) {
  set_level("info");
  EXPECT_FALSE(enabled(spdlog::level::debug));
  EXPECT_TRUE(enabled(spdlog::level::info));
  set_level("off");
  EXPECT_FALSE(enabled(spdlog::level::err));
}

// init() may be called more than once (the second replaces the first) and
// writes to a file when asked; --log-level debug then shows debug lines.
TEST_F(CapturedLog, InitTwiceWithFileShowsDebugLines) {
  korch::testing::TempDir dir;
  auto path = dir.file("korch.log");
  init("info");
  init("debug", path.string());
  KLOG_DEBUG("[llm m] concurrency limit {} -> {}", 4, 5);
  spdlog::default_logger()->flush();
  auto written = read_file(path);
  ASSERT_TRUE(written) << written.error().message;
  EXPECT_NE(written->find("debug [llm m] concurrency limit 4 -> 5"), std::string::npos) << *written;
  spdlog::drop("korch");
}

TEST(Redact, ReplacesEverySecretOccurrence) {
  EXPECT_EQ(redact("key sk-1 and sk-1 again, other", {"sk-1", "other"}),
            "key **** and **** again, ****");
  EXPECT_EQ(redact("nothing to hide", {"", "absent"}), "nothing to hide");
}

}  // namespace
}  // namespace korch::log
