// Tests of config/tasks: id ranges, discovery over the KernelBench copy in
// ../shared/kernelbench, plain task folders, and broken or missing sources.
#include "config/tasks.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/task_sources.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::config {
namespace {

namespace fs = std::filesystem;

using korch::testing::TempDir;

// A valid one-op task file (tests/support/task_sources.hpp).
const char* const k_task_source = korch::testing::k_relu_task_source;

std::string kernelbench() {
  std::string dir = KORCH_SHARED_KERNELBENCH;
  return fs::is_directory(dir + "/level1") ? dir : std::string();
}

#define REQUIRE_KERNELBENCH()    \
  const auto kb = kernelbench(); \
  if (kb.empty()) GTEST_SKIP() << "no KernelBench copy at " KORCH_SHARED_KERNELBENCH

// ---------------------------------------------------------------------------
// parse_id_ranges

TEST(IdRanges, ParsesRangesAndSingles) {
  auto ids = parse_id_ranges("1-10,15");
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ(ids->size(), 11u);
  EXPECT_EQ(ids->front(), 1);
  EXPECT_EQ(ids->back(), 15);

  auto messy = parse_id_ranges(" 3 , 1 - 2 ,2,3");
  ASSERT_TRUE(messy) << messy.error().message;
  EXPECT_EQ(*messy, (std::vector<int>{1, 2, 3}));

  auto empty = parse_id_ranges("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());

  auto single = parse_id_ranges("7-7");
  ASSERT_TRUE(single);
  EXPECT_EQ(*single, std::vector<int>{7});
}

class IdRangeErrors : public ::testing::TestWithParam<const char*> {};

TEST_P(IdRangeErrors, Rejected) {
  auto ids = parse_id_ranges(GetParam());
  ASSERT_FALSE(ids) << GetParam();
  EXPECT_NE(ids.error().message.find(std::string("'") + GetParam() + "'"), std::string::npos)
      << ids.error().message;
}

INSTANTIATE_TEST_SUITE_P(Cases, IdRangeErrors,
                         ::testing::Values("1-", "-3", "a", "5-1", "1,,2", "1,", "1.5", "1-2-3",
                                           "x-y"));

// ---------------------------------------------------------------------------
// KernelBench

TEST(KernelBench, Level1HasAHundredTasks) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {1}, .ids = ""});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 100u);
  for (std::size_t i = 0; i < tasks->size(); ++i) {
    EXPECT_EQ((*tasks)[i].level, 1);
    EXPECT_EQ((*tasks)[i].number, static_cast<int>(i) + 1);  // sorted numerically, not by name
  }
  const auto& relu = (*tasks)[18];
  EXPECT_EQ(relu.id, "L1/19_ReLU");
  EXPECT_EQ(relu.name, "ReLU");
  EXPECT_TRUE(fs::path(relu.path).is_absolute());
  EXPECT_NE(relu.source.find("torch.relu(x)"), std::string::npos);
}

TEST(KernelBench, IdRangeSelects) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {1}, .ids = "1-3"});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_TRUE((*tasks)[0].id.starts_with("L1/1_"));
  EXPECT_TRUE((*tasks)[2].id.starts_with("L1/3_"));
}

TEST(KernelBench, Level4HasTwentyTasks) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {4}, .ids = ""});
  ASSERT_TRUE(tasks) << tasks.error().message;
  EXPECT_EQ(tasks->size(), 20u);
}

TEST(KernelBench, SeveralLevelsSortByLevelThenNumber) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {2, 1}, .ids = "9-10"});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 4u);
  EXPECT_EQ((*tasks)[0].level, 1);
  EXPECT_EQ((*tasks)[0].number, 9);
  EXPECT_EQ((*tasks)[1].number, 10);
  EXPECT_EQ((*tasks)[2].level, 2);
  EXPECT_EQ((*tasks)[3].id.substr(0, 6), "L2/10_");
}

TEST(KernelBench, MissingLevelFolderIsAnError) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {1, 7}, .ids = ""});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find("level7"), std::string::npos) << tasks.error().message;
}

TEST(KernelBench, IdsMatchingNothingIsAnError) {
  REQUIRE_KERNELBENCH();
  auto tasks = load_tasks({.kernelbench_dir = kb, .levels = {4}, .ids = "500"});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find("no tasks match ids '500'"), std::string::npos)
      << tasks.error().message;
}

TEST(KernelBench, SingleFileGetsItsLevelFromTheFolder) {
  REQUIRE_KERNELBENCH();
  auto task = load_task_file(kb + "/level1/19_ReLU.py");
  ASSERT_TRUE(task) << task.error().message;
  EXPECT_EQ(task->id, "L1/19_ReLU");
  EXPECT_EQ(task->level, 1);
  EXPECT_EQ(task->number, 19);
}

// ---------------------------------------------------------------------------
// Plain folders

TEST(PlainFolder, TasksHaveLevelZero) {
  TempDir dir;
  dir.write("10_Double.py", k_task_source);
  dir.write("2_Other.py", k_task_source);
  dir.write("README.md", "not a task");
  dir.write("__init__.py", "");
  // Levels are ignored for a folder without level subfolders.
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = ""});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].id, "2_Other");
  EXPECT_EQ((*tasks)[0].level, 0);
  EXPECT_EQ((*tasks)[1].id, "10_Double");
  EXPECT_EQ((*tasks)[1].name, "Double");

  auto one = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = "10"});
  ASSERT_TRUE(one) << one.error().message;
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].number, 10);
}

TEST(PlainFolder, ExampleTasksLoad) {
  auto tasks = load_tasks({.kernelbench_dir = std::string(KORCH_SOURCE_DIR) + "/examples/tasks",
                           .levels = {1},
                           .ids = "1-4"});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 4u);
  EXPECT_EQ((*tasks)[0].id, "1_ReLU_small");
  EXPECT_EQ((*tasks)[1].id, "2_Add_small");
  EXPECT_EQ((*tasks)[2].id, "3_Scale_small");
  EXPECT_EQ((*tasks)[3].id, "4_RowSum_small");
}

TEST(PlainFolder, BrokenTaskFileFailsNamingIt) {
  TempDir dir;
  dir.write("1_Good.py", k_task_source);
  std::string broken = k_task_source;
  broken.replace(broken.find("def get_init_inputs"), 19, "def get_init_inputz");
  auto bad = dir.write("2_Bad.py", broken);
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = ""});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find(bad), std::string::npos) << tasks.error().message;
  EXPECT_NE(tasks.error().message.find("get_init_inputs"), std::string::npos)
      << tasks.error().message;

  auto single = load_task_file(bad);
  ASSERT_FALSE(single);
  EXPECT_NE(single.error().message.find(bad), std::string::npos);

  // Unselected broken files do not matter.
  auto good = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = "1"});
  ASSERT_TRUE(good) << good.error().message;
}

TEST(PlainFolder, MissingModelClass) {
  TempDir dir;
  std::string src = k_task_source;
  src.replace(src.find("class Model("), 12, "class Modelx(");
  auto path = dir.write("3_NoModel.py", src);
  auto task = load_task_file(path);
  ASSERT_FALSE(task);
  EXPECT_NE(task.error().message.find("class Model"), std::string::npos) << task.error().message;
}

TEST(PlainFolder, FileWithoutNumberIsAnError) {
  TempDir dir;
  dir.write("1_Good.py", k_task_source);
  auto odd = dir.write("helper.py", k_task_source);
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = ""});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find(odd), std::string::npos) << tasks.error().message;
}

TEST(PlainFolder, SingleFileWithoutNumber) {
  TempDir dir;
  auto path = dir.write("mytask.py", k_task_source);
  auto task = load_task_file(path);
  ASSERT_TRUE(task) << task.error().message;
  EXPECT_EQ(task->id, "mytask");
  EXPECT_EQ(task->level, 0);
  EXPECT_EQ(task->number, 0);
}

TEST(Sources, MissingDirectory) {
  auto tasks = load_tasks({.kernelbench_dir = "/nonexistent/kb", .levels = {1}, .ids = ""});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find("/nonexistent/kb"), std::string::npos)
      << tasks.error().message;
  auto task = load_task_file("/nonexistent/kb/1_X.py");
  ASSERT_FALSE(task);
  EXPECT_NE(task.error().message.find("/nonexistent/kb/1_X.py"), std::string::npos);
}

TEST(Sources, EmptyFolderHasNoTasks) {
  TempDir dir;
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = ""});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find(dir.path().string()), std::string::npos)
      << tasks.error().message;
  EXPECT_NE(tasks.error().message.find("no task files"), std::string::npos);
}

TEST(Sources, BadIdSpecNamesTheFolder) {
  TempDir dir;
  dir.write("1_Good.py", k_task_source);
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {1}, .ids = "1-"});
  ASSERT_FALSE(tasks);
  EXPECT_NE(tasks.error().message.find(dir.path().string()), std::string::npos)
      << tasks.error().message;
}

TEST(Sources, CheckoutTopFolderFindsKernelBenchSubfolder) {
  TempDir dir;
  dir.write("KernelBench/level1/1_A.py", k_task_source);
  dir.write("KernelBench/level2/1_B.py", k_task_source);
  auto tasks = load_tasks({.kernelbench_dir = dir.path().string(), .levels = {2}, .ids = ""});
  ASSERT_TRUE(tasks) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].id, "L2/1_B");
}

}  // namespace
}  // namespace korch::config
