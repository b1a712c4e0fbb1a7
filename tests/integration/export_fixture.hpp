#pragma once
// Shared by the integration tests that compare a campaign's export with an
// uninterrupted run's: `korch export` records, and the same records with the
// run-describing fields (docs/export.md, the exporter's own list) removed.
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "reports/export.hpp"
#include "tests/integration/campaign_fixture.hpp"

namespace korch::testing {

inline std::vector<nlohmann::json> export_records(const std::string& dir, const std::string& toml) {
  auto [rc, out] = run_capture({KORCH_BIN, "export", toml, "--format", "jsonl"}, dir);
  EXPECT_EQ(rc, 0) << out;
  std::vector<nlohmann::json> records;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  }
  return records;
}

inline std::vector<nlohmann::json> normalized_export(const std::string& dir,
                                                     const std::string& toml) {
  auto records = export_records(dir, toml);
  for (auto& j : records) {
    for (auto& f : reports::run_describing_fields()) j.erase(f);
  }
  return records;
}

// A resumed campaign's export equals the uninterrupted run's, record for record.
inline void expect_same_export(const std::vector<nlohmann::json>& resumed,
                               const std::vector<nlohmann::json>& reference) {
  ASSERT_EQ(resumed.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i)
    EXPECT_EQ(resumed[i], reference[i]) << "record " << i;
}

}  // namespace korch::testing
