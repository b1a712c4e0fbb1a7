#pragma once
// Copying campaigns whole from one store to another, through the Store
// interface alone, so any pair of backends works (korch store copy
// sqlite:PATH postgres://..., and back).
#include <cstdint>
#include <string>

#include "store/store.hpp"

namespace korch::store {

struct CopyStats {
  std::int64_t campaigns = 0;
  std::int64_t episodes = 0;
  std::int64_t rows = 0;  // every row written, campaigns and tasks included
};

// Copies the campaign `campaign_id` ("" = every campaign of `from`) with its
// tasks, episodes, messages of every epoch, turns, LLM calls, evaluations,
// events and finals. Rows keep every column (ids, timestamps, statuses);
// events keep their order. Leases are not copied (they describe a running
// process). Refuses a campaign that `to` already holds (nothing is merged).
// Writes one episode per batch: a failure leaves the campaigns copied so far
// and the failing one partly copied; the error names it.
Result<CopyStats> copy_campaigns(Store& from, Store& to, const std::string& campaign_id = "");

}  // namespace korch::store
