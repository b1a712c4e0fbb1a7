// The C++ rule table is generated from korch_rules.py at build time; these
// checks catch a broken generator or a missing source path.
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "evaluator/rules/rule_table.hpp"

namespace korch::evaluator {
namespace {

TEST(RuleTable, HasUniqueIdsAndMessages) {
  const auto docs = rule_docs();
  ASSERT_GE(docs.size(), 40u);
  std::set<std::string> ids;
  for (const auto& d : docs) {
    EXPECT_FALSE(d.id.empty());
    EXPECT_FALSE(d.message.empty()) << d.id;
    EXPECT_EQ(d.message.find('\n'), std::string::npos) << d.id;
    EXPECT_TRUE(ids.insert(d.id).second) << "duplicate " << d.id;
  }
  for (const char* id : {"try_except", "load_inline_dynamic", "compiler_flag", "native_symbol"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
}

TEST(RuleTable, PythonModuleIsWhereTheWorkerLooks) {
  const std::filesystem::path dir = rules_python_dir();
  EXPECT_TRUE(dir.is_absolute());
  EXPECT_TRUE(std::filesystem::exists(dir / "korch_rules.py"));
}

}  // namespace
}  // namespace korch::evaluator
