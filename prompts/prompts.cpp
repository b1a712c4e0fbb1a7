#include "prompts/prompts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prompts/templates.hpp"
#include "util/error.hpp"

namespace korch::prompts {
namespace {

// Feedback size limits (DESIGN §2): heads of errors, tails of logs.
constexpr std::size_t k_error_head_chars = 2500;
constexpr std::size_t k_compile_tail_chars = 3500;
constexpr std::size_t k_runtime_tail_chars = 2000;

std::string head(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + "\n[... truncated]";
}

std::string tail(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : "[... truncated]\n" + s.substr(s.size() - n);
}

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string score_text(config::Reward reward) {
  switch (reward) {
    case config::Reward::roofline:
      return "0 unless correct; otherwise 0.3 + 2.7 * min(t_min / t_yours, 1), where t_min is the "
             "roofline lower bound of the task on the target device.";
    case config::Reward::beat_baseline:
      return "1 if correct and the 95% interval of your speedup over the reference lies above 1, "
             "else 0.";
    case config::Reward::speedup: break;
  }
  return "0 unless correct; otherwise 0.3 + clamp(log2(speedup), -0.2, 3), where speedup is the "
         "reference's median time divided by yours.";
}

std::string fmt_num(std::optional<double> v) { return v ? fmt::format("{:.3g}", *v) : "n/a"; }

}  // namespace

std::string fill(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  out.reserve(text.size() + 256);
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    auto close = text.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    out.append(text.substr(pos, open - pos));
    auto key = std::string(text.substr(open + 2, close - open - 2));
    if (auto it = vars.find(key); it != vars.end()) {
      out += it->second;
    } else {
      out.append(text.substr(open, close + 2 - open));
    }
    pos = close + 2;
  }
  out.append(text.substr(pos));
  return out;
}

std::string_view template_text(std::string_view name) {
  for (auto& [key, text] : templates()) {
    if (key == name) return text;
  }
  throw Fatal(fmt::format("unknown prompt template '{}'", name));
}

std::string system_prompt(const SystemFacts& facts) {
  std::string rules;
  for (auto& r : facts.rules) rules += fmt::format("- [{}] {}\n", r.id, r.message);
  if (rules.empty()) rules = "- (no static rules are enforced by this evaluator)\n";
  return trim_newline(
      fill(template_text("system"),
           {{"device", facts.device},
            {"tolerance", config::tolerance_summary(facts.tolerance)},
            {"score", score_text(facts.reward)},
            {"torch_ops_note", facts.torch_ops == config::TorchOps::forbid
                                   ? " (campaign policy: tensor arithmetic and "
                                     "reductions in torch are forbidden at run time)"
                                   : ""},
            {"rules", trim_newline(rules)},
            {"max_turns", std::to_string(facts.max_turns)}}));
}

std::string footer(int replies_left) {
  if (replies_left <= 1) return trim_newline(std::string(template_text("footer_last")));
  return trim_newline(
      fill(template_text("footer_more"), {{"replies_left", std::to_string(replies_left)}}));
}

std::string task_prompt(const config::Task& task, int replies_left) {
  return trim_newline(fill(template_text("task"), {{"task_id", task.id},
                                                   {"source", trim_newline(task.source)},
                                                   {"footer", footer(replies_left)}}));
}

namespace {
// The verdict and its details, headed by the kind of evaluation.
std::string render_result(const evaluator::Report& report, evaluator::Mode kind) {
  std::string mock_note = report.mock ? " [MOCK evaluator: this result is fake]" : "";
  std::string status = evaluator::to_string(report.status);
  if (report.status == evaluator::Verdict::ok) {
    if (kind == evaluator::Mode::submit)
      return trim_newline(
          fill(template_text("feedback_submit_ok"), {{"max_abs_diff", fmt_num(report.max_abs_diff)},
                                                     {"speedup", fmt_num(report.speedup)},
                                                     {"mock_note", mock_note}}));
    return trim_newline(
        fill(template_text("feedback_ok"), {{"status", status},
                                            {"max_abs_diff", fmt_num(report.max_abs_diff)},
                                            {"mock_note", mock_note}}));
  }
  std::string details;
  if (!report.rule_id.empty()) details += fmt::format("Rule: {}\n", report.rule_id);
  if (!report.error.empty())
    details += fmt::format("Error:\n{}\n", head(report.error, k_error_head_chars));
  if (!report.compile_log.empty()) {
    details += fmt::format("Compiler output (tail):\n{}\n",
                           tail(report.compile_log, k_compile_tail_chars));
  }
  if (!report.runtime_detail.empty()) {
    details += fmt::format("Runtime detail (tail):\n{}\n",
                           tail(report.runtime_detail, k_runtime_tail_chars));
  }
  std::vector<std::string> diffs;
  if (report.max_abs_diff) diffs.push_back("max_abs_diff " + fmt_num(report.max_abs_diff));
  if (report.max_rel_diff) diffs.push_back("max_rel_diff " + fmt_num(report.max_rel_diff));
  if (report.mismatch_frac) diffs.push_back("mismatch_frac " + fmt_num(report.mismatch_frac));
  if (!diffs.empty()) details += fmt::format("{}\n", fmt::join(diffs, ", "));
  return trim_newline(fill(template_text("feedback_fail"),
                           {{"kind", kind == evaluator::Mode::submit ? "SUBMIT" : "CHECK"},
                            {"status", status},
                            {"mock_note", mock_note},
                            {"details", trim_newline(details)}}));
}
}  // namespace

std::string render_report(const evaluator::Report& report, evaluator::Mode kind) {
  // Facts that are not a verdict (the reference fragile on a family) follow
  // the result, whatever it is.
  std::string notes;
  for (const auto& n : report.notes) notes += "\nNote: " + head(n, k_error_head_chars);
  return render_result(report, kind) + notes;
}

std::string check_feedback(const evaluator::Report& report, int replies_left) {
  return render_report(report) + "\n\n" + footer(replies_left);
}

std::string no_code_message(bool truncated, int replies_left) {
  auto text = trim_newline(std::string(template_text(truncated ? "truncated" : "no_code")));
  return text + "\n\n" + footer(replies_left);
}

std::string compaction_summary(const config::Task& task,
                               const std::vector<AttemptSummary>& attempts, bool resumed,
                               int replies_left) {
  int passed = 0;
  std::vector<std::string> history;
  const AttemptSummary* latest_passing = nullptr;
  const AttemptSummary* latest_code = nullptr;
  const AttemptSummary* latest_result = nullptr;
  for (auto& a : attempts) {
    if (a.passed) {
      ++passed;
      latest_passing = &a;
    }
    if (!a.code.empty()) latest_code = &a;
    if (!a.result_text.empty()) latest_result = &a;
    history.push_back(fmt::format("turn {} {} → {}", a.turn, a.action, a.status));
  }
  const AttemptSummary* shown = latest_passing ? latest_passing : latest_code;
  return trim_newline(fill(
      template_text("compaction"),
      {{"resumed_note", resumed ? "(The conversation was resumed after a restart.)\n" : ""},
       {"task_id", task.id},
       {"attempts", std::to_string(attempts.size())},
       {"passed", std::to_string(passed)},
       {"history", history.empty() ? "none" : fmt::format("{}", fmt::join(history, "; "))},
       {"source", trim_newline(task.source)},
       {"code_label", latest_passing
                          ? fmt::format("Latest code that passed a CHECK (turn {})", shown->turn)
                      : shown ? fmt::format("Latest code (turn {}, did not pass)", shown->turn)
                              : "No code yet"},
       {"code", shown ? trim_newline(shown->code) : "# (none)"},
       {"latest_result", latest_result ? latest_result->result_text : "none"},
       {"footer", footer(replies_left)}}));
}

}  // namespace korch::prompts
