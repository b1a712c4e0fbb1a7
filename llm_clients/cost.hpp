#pragma once
// What a completion cost. Pure: no I/O, no state.
#include "config/campaign.hpp"
#include "llm_clients/types.hpp"

namespace korch::llm {

// US dollars for `usage` at `model`'s prices (per million tokens). Cached
// prompt tokens are priced at price_cached_per_mtok, or at the prompt price
// when that is 0 (not set); the rest of the prompt at price_prompt_per_mtok
// (never fewer than 0 tokens, should a provider report more cached tokens
// than prompt tokens); completion tokens (reasoning included) at
// price_completion_per_mtok.
double cost_usd(const config::ModelConfig& model, const Usage& usage);

}  // namespace korch::llm
