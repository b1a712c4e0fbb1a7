#include "llm_clients/cost.hpp"

#include <algorithm>
#include <cstdint>

namespace korch::llm {

namespace {
constexpr double k_tokens_per_mtok = 1e6;
}  // namespace

double cost_usd(const config::ModelConfig& model, const Usage& usage) {
  const double cached_price =
      model.price_cached_per_mtok > 0 ? model.price_cached_per_mtok : model.price_prompt_per_mtok;
  const auto uncached = std::max<std::int64_t>(0, usage.prompt_tokens - usage.cached_tokens);
  return (static_cast<double>(uncached) * model.price_prompt_per_mtok +
          static_cast<double>(usage.cached_tokens) * cached_price +
          static_cast<double>(usage.completion_tokens) * model.price_completion_per_mtok) /
         k_tokens_per_mtok;
}

}  // namespace korch::llm
