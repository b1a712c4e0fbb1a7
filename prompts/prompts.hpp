#pragma once
// Every text korch sends to a model. The wording lives in
// prompts/templates/*.txt (embedded in the binary); this module only fills in
// `{{placeholders}}`. It contains no evaluation logic: verdicts arrive as
// evaluator::Report and are rendered, never judged, here.
#include <map>
#include <string>
#include <vector>

#include "config/tasks.hpp"
#include "config/vocabulary.hpp"
#include "evaluator/evaluator.hpp"

namespace korch::prompts {

// Facts stated by the system prompt.
struct SystemFacts {
  std::string device;  // evaluator's device description
  config::Tolerance tolerance = config::Tolerance::strict;
  config::Reward reward = config::Reward::speedup;
  config::TorchOps torch_ops = config::TorchOps::allow;
  int max_turns = 5;
  std::vector<evaluator::RuleDoc> rules;
};

// Replaces each `{{key}}` in `text` with vars[key]; unknown keys are left as
// they are (so a typo is visible in the output and caught by tests).
std::string fill(std::string_view text, const std::map<std::string, std::string>& vars);

// The named template's text. Throws korch::Fatal for an unknown name.
std::string_view template_text(std::string_view name);

std::string system_prompt(const SystemFacts& facts);

// The first task message, ending with the footer for `replies_left`.
std::string task_prompt(const config::Task& task, int replies_left);

// "You have N replies left ..." or the last-turn notice when replies_left == 1.
std::string footer(int replies_left);

// A CHECK result (DESIGN §2 feedback rendering), followed by the footer.
std::string check_feedback(const evaluator::Report& report, int replies_left);

// Just the rendered result, without the footer (also used by compaction),
// headed by the kind of evaluation that produced it ("CHECK result" or
// "SUBMIT result").
std::string render_report(const evaluator::Report& report,
                          evaluator::Mode kind = evaluator::Mode::check);

// No code block in the reply (truncated = finish_reason was "length").
std::string no_code_message(bool truncated, int replies_left);

// One attempt, as the compaction summary sees it.
struct AttemptSummary {
  int turn = 0;
  std::string action;       // check | submit | none
  std::string status;       // verdict, "no_code" or "truncated"
  std::string code;         // "" when none
  bool passed = false;      // a CHECK with status ok
  std::string result_text;  // render_report() of its check, "" if none
};

// The compaction summary that replaces the conversation (DESIGN §2).
std::string compaction_summary(const config::Task& task,
                               const std::vector<AttemptSummary>& attempts, bool resumed,
                               int replies_left);

}  // namespace korch::prompts
