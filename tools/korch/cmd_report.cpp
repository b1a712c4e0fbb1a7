// korch status / export / report / config show / tasks list.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "config/loader.hpp"
#include "config/tasks.hpp"
#include "reports/export.hpp"
#include "reports/report.hpp"
#include "reports/training_export.hpp"
#include "tools/korch/cli.hpp"
#include "tools/korch/common.hpp"

namespace korch::cli {

int cmd_status(const Args& args) {
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    return report_failure("status", store_open_failure_kind(st.error()), st.error().message);
  }
  auto& store = **st;
  auto campaigns = store.list_campaigns();
  if (!campaigns) {
    return report_failure("status", ErrorKind::failure, campaigns.error().message);
  }
  std::vector<std::string> shown;
  for (auto& c : *campaigns) {
    if (args.get("--campaign") && c.id != campaign_id) continue;
    shown.push_back(c.id);
    auto n = store.counts(c.id);
    if (!n) {
      return report_failure("status", ErrorKind::failure, n.error().message);
    }
    // The report's own reading: its mock label, its verdict counts.
    auto report = reports::build_report(store, c.id);
    if (!report) return report_failure("status", ErrorKind::failure, report.error().message);
    std::printf("campaign %s (%s)%s\n", c.name.c_str(), c.id.c_str(),
                report->mock ? fmt::format(" [{}]", reports::k_mock_label).c_str() : "");
    std::printf(
        "  episodes %lld: %lld final (%lld submitted, %lld correct), %lld running, %lld pending\n",
        static_cast<long long>(n->episodes), static_cast<long long>(n->final),
        static_cast<long long>(n->submitted), static_cast<long long>(n->correct),
        static_cast<long long>(n->running), static_cast<long long>(n->pending));
    std::printf("  turns %lld, llm calls %lld, tokens %lld in / %lld out, cost $%.4f\n",
                static_cast<long long>(n->turns), static_cast<long long>(n->llm_calls),
                static_cast<long long>(n->prompt_tokens),
                static_cast<long long>(n->completion_tokens), n->cost_usd);
    std::string verdicts;
    for (const auto& [name, count] : report->verdicts)
      verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", name, count);
    std::printf("  verdicts: %s\n", verdicts.empty() ? "none yet" : verdicts.c_str());
  }
  print_fleet(args, shown);
  return k_exit_ok;
}

// --format sft|rl: the training exports (reports/training_export.hpp).
int cmd_training_export(const Args& args, reports::TrainingFormat format) {
  reports::TrainingOptions o;
  o.format = format;
  o.correct_only = args.has("--correct-only");
  o.openai_only = args.has("--openai-only");
  auto min_speedup = get_number<double>(args, "--min-speedup");
  if (!min_speedup) return report_failure("export", min_speedup.error());
  o.min_speedup = *min_speedup;
  auto level = get_number<std::int64_t>(args, "--level");
  if (!level) return report_failure("export", level.error());
  if (*level) o.level = static_cast<int>(**level);
  o.model = args.get("--model");
  if (o.openai_only && format != reports::TrainingFormat::sft)
    return report_failure("export", ErrorKind::invalid, "--openai-only applies to --format sft");
  auto gamma = get_number<double>(args, "--gamma");
  if (!gamma) return report_failure("export", gamma.error());
  if (*gamma) {
    if (format != reports::TrainingFormat::rl)
      return report_failure("export", ErrorKind::invalid, "--gamma applies to --format rl");
    if (!(**gamma >= 0 && **gamma <= 1))
      return report_failure("export", ErrorKind::invalid, "--gamma must be in [0, 1]");
    o.gamma = **gamma;
  }
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) return report_failure("export", store_open_failure_kind(st.error()), st.error().message);
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (auto path = args.get("--out")) {
    file.open(*path, std::ios::binary | std::ios::trunc);
    if (!file)
      return report_failure("export", ErrorKind::failure, fmt::format("cannot write {}", *path));
    out = &file;
  }
  auto n = reports::write_training_export(**st, campaign_id, o, *out);
  if (!n) return report_failure("export", ErrorKind::failure, n.error().message);
  out->flush();
  if (auto path = args.get("--card")) {
    auto card = reports::training_card(**st, campaign_id, o, *n);
    if (!card) return report_failure("export", ErrorKind::failure, card.error().message);
    std::ofstream c(*path, std::ios::binary | std::ios::trunc);
    c << *card << '\n';
    if (!c)
      return report_failure("export", ErrorKind::failure, fmt::format("cannot write {}", *path));
  }
  std::fprintf(stderr,
               "korch export: %d record(s); %d filtered out, %d duplicate code, %d without code\n",
               n->records, n->filtered_out, n->duplicates, n->no_code);
  return k_exit_ok;
}

int cmd_export(const Args& args) {
  auto format_name = args.get("--format").value_or("jsonl");
  if (format_name == "sft") return cmd_training_export(args, reports::TrainingFormat::sft);
  if (format_name == "rl") return cmd_training_export(args, reports::TrainingFormat::rl);
  const auto format = enum_from_name<reports::ExportFormat>(format_name);
  if (!format) {
    return report_failure(
        "export", ErrorKind::invalid,
        fmt::format("--format must be jsonl, csv, sft or rl (got '{}')", format_name));
  }
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    return report_failure("export", store_open_failure_kind(st.error()), st.error().message);
  }
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (auto path = args.get("--out")) {
    file.open(*path, std::ios::binary | std::ios::trunc);
    if (!file) {
      return report_failure("export", ErrorKind::failure,
                            fmt::format("cannot write {}", path->c_str()));
    }
    out = &file;
  }
  if (auto r = reports::write_export(**st, campaign_id, *format, *out); !r) {
    return report_failure("export", ErrorKind::failure, r.error().message);
  }
  out->flush();
  return k_exit_ok;
}

int cmd_report(const Args& args) {
  // text (default) | json | html; --json is the older spelling of --format json.
  auto format_name = args.get("--format").value_or(args.has("--json") ? "json" : "text");
  const auto format = enum_from_name<reports::ReportFormat>(format_name);
  if (!format) {
    return report_failure(
        "report", ErrorKind::invalid,
        fmt::format("--format must be text, json or html (got '{}')", format_name));
  }
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    return report_failure("report", store_open_failure_kind(st.error()), st.error().message);
  }
  auto report = reports::build_report(**st, campaign_id);
  if (!report) return report_failure("report", ErrorKind::failure, report.error().message);
  std::string text = reports::render(*report, *format);
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (auto path = args.get("--out")) {
    std::ofstream file(*path, std::ios::binary | std::ios::trunc);
    if (!(file << text) || !file.flush())
      return report_failure("report", ErrorKind::failure, "cannot write " + *path);
    return k_exit_ok;
  }
  std::fputs(text.c_str(), stdout);
  return k_exit_ok;
}

int cmd_config_show(const Args& args) {
  if (args.positional.size() != 1) {
    return report_failure("config show", ErrorKind::invalid, "expected one CAMPAIGN.toml");
  }
  auto loaded =
      config::load_campaign(args.positional[0], config::process_environment(), args.all("--set"));
  if (!loaded) {
    return report_failure("config show", ErrorKind::invalid, loaded.error().message);
  }
  for (auto& w : loaded->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fputs(config::describe(*loaded).c_str(), stdout);
  return k_exit_ok;
}

}  // namespace korch::cli
