#pragma once
// The verdict card beside a campaign's data (issue #51): for each evaluator
// version that scored the campaign, the card `korch audit --store` measured
// for it (attack success x/N and false rejection y/M with their 95% Wilson
// intervals), or a plain "no card measured" -- never a number korch did not
// measure. `korch report` (every format), the dashboard and the training
// export's dataset card show the same lines.
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "util/error.hpp"

namespace korch::reports {

struct VerdictCardLine {
  std::string evaluator_version;   // as the campaign's evaluations name it
  std::vector<std::string> rules;  // the rules versions its reports name ("" unknown)
  // The cards stored for that version (and, where the reports name one, its
  // rules version): one a device; empty when none was measured.
  std::vector<store::VerdictCardRow> cards;
  std::string text;  // one line per card, or "no card measured for evaluator version X"
};

// One line per evaluator version of the campaign's finished evaluations,
// in version order.
Result<std::vector<VerdictCardLine>> campaign_verdict_cards(store::Store& store,
                                                            const std::string& campaign_id);

// The card of one row as one line of text: "verdict card of korch-eval/0.2
// (rules 4, cpu, device ...): attack success 0/72 (0.0%, 95% CI 0.0-5.1%),
// false rejection 0/174 (...)".
std::string verdict_card_text(const store::VerdictCardRow& row);

}  // namespace korch::reports
