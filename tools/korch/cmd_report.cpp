// korch status / export / report / config show / tasks list.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "config/loader.hpp"
#include "config/tasks.hpp"
#include "tools/korch/cli.hpp"
#include "tools/korch/common.hpp"
#include "tools/reports/export.hpp"
#include "tools/reports/report.hpp"

namespace korch::cli {

int cmd_status(const Args& args) {
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    std::fprintf(stderr, "korch status: %s\n", st.error().message.c_str());
    return k_exit_usage;
  }
  auto& store = **st;
  auto campaigns = store.list_campaigns();
  if (!campaigns) {
    std::fprintf(stderr, "korch status: %s\n", campaigns.error().message.c_str());
    return k_exit_error;
  }
  for (auto& c : *campaigns) {
    if (args.get("--campaign") && c.id != campaign_id) continue;
    auto n = store.counts(c.id);
    if (!n) {
      std::fprintf(stderr, "korch status: %s\n", n.error().message.c_str());
      return k_exit_error;
    }
    std::printf("campaign %s (%s)\n", c.name.c_str(), c.id.c_str());
    std::printf("  episodes %lld: %lld final (%lld submitted, %lld correct), %lld running, %lld pending\n",
                static_cast<long long>(n->episodes), static_cast<long long>(n->final),
                static_cast<long long>(n->submitted), static_cast<long long>(n->correct),
                static_cast<long long>(n->running), static_cast<long long>(n->pending));
    std::printf("  turns %lld, llm calls %lld, tokens %lld in / %lld out, cost $%.4f\n",
                static_cast<long long>(n->turns), static_cast<long long>(n->llm_calls),
                static_cast<long long>(n->prompt_tokens), static_cast<long long>(n->completion_tokens), n->cost_usd);
  }
  return k_exit_ok;
}

int cmd_export(const Args& args) {
  auto format_name = args.get("--format").value_or("jsonl");
  reports::ExportFormat format;
  if (format_name == "jsonl") {
    format = reports::ExportFormat::jsonl;
  } else if (format_name == "csv") {
    format = reports::ExportFormat::csv;
  } else {
    std::fprintf(stderr, "korch export: --format must be jsonl or csv (got '%s')\n", format_name.c_str());
    return k_exit_usage;
  }
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    std::fprintf(stderr, "korch export: %s\n", st.error().message.c_str());
    return k_exit_usage;
  }
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (auto path = args.get("--out")) {
    file.open(*path, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::fprintf(stderr, "korch export: cannot write %s\n", path->c_str());
      return k_exit_error;
    }
    out = &file;
  }
  if (auto r = reports::write_export(**st, campaign_id, format, *out); !r) {
    std::fprintf(stderr, "korch export: %s\n", r.error().message.c_str());
    return k_exit_error;
  }
  out->flush();
  return k_exit_ok;
}

int cmd_report(const Args& args) {
  // text (default) | json | html; --json is the older spelling of --format json.
  auto format = args.get("--format").value_or(args.has("--json") ? "json" : "text");
  if (format != "text" && format != "json" && format != "html") {
    std::fprintf(stderr, "korch report: --format must be text, json or html (got '%s')\n", format.c_str());
    return k_exit_usage;
  }
  std::string campaign_id;
  auto st = open_store_for_reading(args, &campaign_id);
  if (!st) {
    std::fprintf(stderr, "korch report: %s\n", st.error().message.c_str());
    return k_exit_usage;
  }
  auto report = reports::build_report(**st, campaign_id);
  if (!report) {
    std::fprintf(stderr, "korch report: %s\n", report.error().message.c_str());
    return k_exit_error;
  }
  std::string text = format == "json"   ? reports::render_json(*report)
                     : format == "html" ? reports::render_html(*report)
                                        : reports::render_text(*report);
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (auto path = args.get("--out")) {
    std::ofstream file(*path, std::ios::binary | std::ios::trunc);
    if (!(file << text) || !file.flush()) {
      std::fprintf(stderr, "korch report: cannot write %s\n", path->c_str());
      return k_exit_error;
    }
    return k_exit_ok;
  }
  std::fputs(text.c_str(), stdout);
  return k_exit_ok;
}

int cmd_config_show(const Args& args) {
  if (args.positional.size() != 1) {
    std::fprintf(stderr, "korch config show: expected one CAMPAIGN.toml\n");
    return k_exit_usage;
  }
  auto loaded = config::load_campaign(args.positional[0], config::process_environment(), args.all("--set"));
  if (!loaded) {
    std::fprintf(stderr, "korch config show: %s\n", loaded.error().message.c_str());
    return k_exit_usage;
  }
  for (auto& w : loaded->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fputs(config::describe(*loaded).c_str(), stdout);
  return k_exit_ok;
}

}  // namespace korch::cli
