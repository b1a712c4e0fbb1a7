#pragma once
// Training exports (issue #37): a campaign's store as data to train on.
//   sft: one record per episode, the conversation as last sent to the model
//        (its live epoch: after a compaction, the summary and what followed)
//        with the model's final reply, in OpenAI's chat fine-tuning shape
//        {"messages": [{"role", "content"}...]}, plus "metadata" (verdict,
//        reward, speedup, ids) unless openai_only.
//        A fallback final (the engine submitted the latest passing code
//        after the turns ran out) is exported with the turn whose code it
//        scored, the conversation cut at that turn's reply.
//   rl:  one record per scored action, in order: each turn's CHECK or SUBMIT
//        (a CHECK and a SUBMIT of the same code are two records) and a
//        fallback SUBMIT; the code, the evaluation's verdict, the reward (a
//        SUBMIT's from its report, 0 for an unscored CHECK) and the
//        discounted return from that action, sum_j>=i gamma^(j-i) r_j over
//        the episode's actions.
// Every record carries the verdict and its class (store::verdict_class:
// hack_like verdicts labelled). SFT de-duplicates by the final's code hash;
// RL keeps every action. Filters and the dataset card are the same for both.
// The store never holds a secret (API keys stay in the environment), and
// nothing but the store is read.
#include <optional>
#include <ostream>
#include <string>

#include "store/store.hpp"
#include "util/error.hpp"

namespace korch::reports {

enum class TrainingFormat { sft, rl };

struct TrainingOptions {
  TrainingFormat format = TrainingFormat::sft;
  bool correct_only = false;          // sft: the episode's final is correct; rl: the turn passed
  std::optional<double> min_speedup;  // the final's (sft) or the SUBMIT's (rl) speedup
  std::optional<int> level;           // task ids "L<level>/..."
  std::optional<std::string> model;   // the episode's model (sft) or the turn's (rl)
  bool openai_only = false;           // sft: only "messages" (no "metadata")
  double gamma = 1.0;                 // rl: the discount of the per-action return, in [0, 1]
};

struct TrainingCounts {
  int records = 0;
  int filtered_out = 0;  // by the filters
  int duplicates = 0;    // sft: code already exported (same sha)
  int no_code = 0;       // nothing to learn from: no final code (sft) or no code (rl)
};

// Writes the JSONL records; counts what was kept and dropped.
Result<TrainingCounts> write_training_export(store::Store& store, const std::string& campaign_id,
                                             const TrainingOptions& options, std::ostream& out);

// The dataset card: the campaign's stored config, evaluator versions, modes
// and tolerance, the target device the system prompt named, the options and
// the counts. JSON text.
Result<std::string> training_card(store::Store& store, const std::string& campaign_id,
                                  const TrainingOptions& options, const TrainingCounts& counts);

}  // namespace korch::reports
