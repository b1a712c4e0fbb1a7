#pragma once
// Exports read from the store (the only source of truth). Shared
// by the `korch` CLI and the tests; the report is reports/report.hpp.
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "util/enum_names.hpp"
#include "util/error.hpp"

namespace korch::reports {

enum class ExportFormat { jsonl, csv };

// Fields of the export that describe the run rather than its result: they may
// differ between a killed-and-resumed run and an uninterrupted one with the
// same model replies (docs/export.md lists them).
const std::vector<std::string>& run_describing_fields();

// Where a strategy episode came from (agent/strategy.hpp), read from the
// campaign's "strategy" events: its round (0 under grid) and, for a refine
// episode started from a verified kernel, that kernel's episode, model and
// measured speedup.
struct StrategyOrigin {
  int round = 0;
  std::string seed_episode_id;  // "" when not seeded
  std::string seed_model_id;
  std::optional<double> seed_speedup;
};
// Episode id -> origin, for the episodes a strategy decision started.
std::map<std::string, StrategyOrigin> strategy_origins(const std::vector<store::EventRow>& events);

// Writes one record per attempt (turn) and one per episode, ordered by
// episode id then turn; episode records follow their attempts.
Result<void> write_export(store::Store& store, const std::string& campaign_id, ExportFormat format,
                          std::ostream& out);

}  // namespace korch::reports

namespace korch {
KORCH_ENUM_NAMES(reports::ExportFormat, jsonl, csv);
}  // namespace korch
