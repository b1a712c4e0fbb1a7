// Tests of config/vocabulary: every enum's names convert both ways, are
// unique, and the tolerance table is what the prompt and the docs quote.
#include "config/vocabulary.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

// An enum named by KORCH_ENUM_NAMES with its list wrapped over lines and
// spaced unevenly, as a long list is after clang-format.
namespace korch::config {
enum class Spaced { a, bb, c_c };
}  // namespace korch::config
namespace korch {
// clang-format off
KORCH_ENUM_NAMES(config::Spaced, a,
                 bb ,   c_c);
// clang-format on
}  // namespace korch

namespace korch::config {
namespace {

// Every value of E has a unique, non-empty name that parses back to it.
template <typename E>
void expect_round_trip() {
  std::set<std::string_view> seen;
  for (const auto& [value, name] : EnumNames<E>::k_names) {
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
    EXPECT_EQ(to_string(value), name);
    EXPECT_EQ(from_string<E>(name), value) << name;
  }
  EXPECT_EQ(from_string<E>(""), std::nullopt);
  EXPECT_EQ(from_string<E>("no-such-name"), std::nullopt);
}

TEST(Vocabulary, EveryEnumRoundTrips) {
  expect_round_trip<EvalMode>();
  expect_round_trip<Tolerance>();
  expect_round_trip<Reward>();
  expect_round_trip<TorchOps>();
  expect_round_trip<ResumeMode>();
  expect_round_trip<Synchronous>();
  expect_round_trip<LogLevel>();
  expect_round_trip<LifecycleKind>();
  expect_round_trip<StrategyKind>();
  expect_round_trip<Bandit>();
  expect_round_trip<Spaced>();
}

TEST(Vocabulary, EnumNamesMacroNamesEachValueByItsIdentifier) {
  ASSERT_EQ(std::size(EnumNames<Spaced>::k_names), 3u);
  EXPECT_EQ(to_string(Spaced::a), "a");
  EXPECT_EQ(to_string(Spaced::bb), "bb");
  EXPECT_EQ(to_string(Spaced::c_c), "c_c");
  EXPECT_EQ(from_string<Spaced>("bb "), std::nullopt);
  EXPECT_EQ(enum_choices<Spaced>(), "\"a\", \"bb\" or \"c_c\"");
  static_assert(enum_name(StrategyKind::best_of_k) == "best_of_k");
  static_assert(enum_from_name<LogLevel>("critical") == LogLevel::critical);
}

TEST(Vocabulary, NamesAreTheWireValues) {
  // Stored in the database, the worker's job JSON and the TOML file: never rename.
  EXPECT_EQ(to_string(EvalMode::gpu), "gpu");
  EXPECT_EQ(to_string(Tolerance::tf32), "tf32");
  EXPECT_EQ(to_string(Reward::beat_baseline), "beat_baseline");
  EXPECT_EQ(to_string(TorchOps::forbid), "forbid");
  EXPECT_EQ(to_string(ResumeMode::compact), "compact");
  EXPECT_EQ(to_string(Synchronous::full), "FULL");
  EXPECT_EQ(to_string(LifecycleKind::model_swap), "model_swap");
  // Matching is exact: SQLite's lower-case spelling is not a config value.
  EXPECT_EQ(from_string<Synchronous>("full"), std::nullopt);
}

TEST(Vocabulary, ChoicesReadAsAList) {
  EXPECT_EQ(enum_choices<EvalMode>(), "\"mock\", \"cpu\" or \"gpu\"");
  EXPECT_EQ(enum_choices<TorchOps>(), "\"allow\" or \"forbid\"");
}

TEST(Tolerance, TableValues) {
  constexpr auto strict = tolerance_profile(Tolerance::strict);
  constexpr auto tf32 = tolerance_profile(Tolerance::tf32);
  EXPECT_EQ(strict.atol, 1e-4);
  EXPECT_EQ(strict.rtol, 1e-4);
  EXPECT_FALSE(strict.allow_tf32);
  EXPECT_EQ(tf32.atol, 1e-2);
  EXPECT_TRUE(tf32.allow_tf32);
  // A looser profile never tightens the low-precision bound.
  for (auto t : {Tolerance::strict, Tolerance::tf32})
    EXPECT_GE(tolerance_profile(t).low_precision_tol, tolerance_profile(t).atol);
}

TEST(Tolerance, FormattedAsThePromptWritesIt) {
  EXPECT_EQ(format_tolerance(1e-4), "1e-4");
  EXPECT_EQ(format_tolerance(1e-2), "1e-2");
  EXPECT_EQ(format_tolerance(5e-3), "5e-3");
  EXPECT_EQ(format_tolerance(1e-10), "1e-10");
  EXPECT_EQ(tolerance_summary(Tolerance::strict),
            "atol = rtol = 1e-4 (fp32; TF32 off; fp16/bf16 tasks 1e-2)");
  EXPECT_EQ(tolerance_summary(Tolerance::tf32), "atol = rtol = 1e-2 (TF32 allowed)");
}

}  // namespace
}  // namespace korch::config
