// llm_clients/cost.hpp: the price of a completion, table-driven.
#include "llm_clients/cost.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace korch::llm {
namespace {

struct CostCase {
  std::string name;
  double prompt_price;
  double completion_price;
  double cached_price;
  Usage usage;
  double expected_usd;
};

void PrintTo(const CostCase& c, std::ostream* os) { *os << c.name; }

class CostUsd : public ::testing::TestWithParam<CostCase> {};

TEST_P(CostUsd, Prices) {
  const auto& c = GetParam();
  config::ModelConfig m;
  m.price_prompt_per_mtok = c.prompt_price;
  m.price_completion_per_mtok = c.completion_price;
  m.price_cached_per_mtok = c.cached_price;
  EXPECT_NEAR(cost_usd(m, c.usage), c.expected_usd, 1e-12);
}

Usage usage(std::int64_t prompt, std::int64_t completion, std::int64_t cached = 0) {
  Usage u;
  u.prompt_tokens = prompt;
  u.completion_tokens = completion;
  u.cached_tokens = cached;
  return u;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CostUsd,
    ::testing::Values(
        CostCase{"free", 0, 0, 0, usage(1000, 1000), 0},
        CostCase{"no_tokens", 3, 15, 0, usage(0, 0), 0},
        // 1M prompt at $3 + 0.5M completion at $15.
        CostCase{"prompt_and_completion", 3, 15, 0, usage(1'000'000, 500'000), 3 + 7.5},
        // Cached tokens at their own price, the rest at the prompt price.
        CostCase{"cached_price", 2, 8, 0.5, usage(1'000'000, 0, 400'000), 0.6 * 2 + 0.4 * 0.5},
        // No cached price: cached tokens cost the prompt price.
        CostCase{"cached_without_price", 2, 8, 0, usage(1'000'000, 0, 400'000), 2},
        // More cached than prompt tokens (a provider quirk): never a negative count.
        CostCase{"cached_exceeds_prompt", 2, 8, 1, usage(100, 0, 300), 300 * 1e-6},
        // Reasoning tokens are part of completion_tokens, priced once.
        CostCase{"reasoning_inside_completion", 1, 4, 0,
                 [] {
                   auto u = usage(0, 250'000);
                   u.reasoning_tokens = 200'000;
                   return u;
                 }(),
                 1.0}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace korch::llm
