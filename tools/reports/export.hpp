#pragma once
// Exports read from the store (the only source of truth). Shared
// by the `korch` CLI and the tests; the report is tools/reports/report.hpp.
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

// Writes one record per attempt (turn) and one per episode, ordered by
// episode id then turn; episode records follow their attempts.
Result<void> write_export(store::Store& store, const std::string& campaign_id, ExportFormat format,
                          std::ostream& out);

}  // namespace korch::reports

namespace korch {
template <>
struct EnumNames<reports::ExportFormat> {
  static constexpr std::pair<reports::ExportFormat, std::string_view> k_names[] = {
      {reports::ExportFormat::jsonl, "jsonl"}, {reports::ExportFormat::csv, "csv"}};
};
}  // namespace korch
