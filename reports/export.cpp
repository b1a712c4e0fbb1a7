#include "reports/export.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace korch::reports {
namespace {

using nlohmann::json;

// The fields every record of an episode starts with (attempt and episode
// records alike).
json identity(const char* type, const std::string& campaign_id, const store::EpisodeSummary& ep) {
  return {{"type", type},          {"campaign_id", campaign_id}, {"episode_id", ep.id},
          {"task_id", ep.task_id}, {"model_id", ep.model_id},    {"sample", ep.sample_index}};
}

const std::vector<std::string> k_attempt_columns = {"type",
                                                    "campaign_id",
                                                    "episode_id",
                                                    "task_id",
                                                    "model_id",
                                                    "sample",
                                                    "turn",
                                                    "turn_model",
                                                    "action",
                                                    "parse_status",
                                                    "code_sha",
                                                    "eval_request_id",
                                                    "eval_status",
                                                    "check_correct",
                                                    "check_max_abs_diff",
                                                    "check_error",
                                                    "finish_reason",
                                                    "prompt_tokens",
                                                    "completion_tokens",
                                                    "llm_latency_s",
                                                    "llm_http_attempts",
                                                    "llm_sends",
                                                    "dup_possible",
                                                    "at",
                                                    "code"};

const std::vector<std::string> k_episode_columns = {
    "type",          "campaign_id",       "episode_id",  "task_id", "model_id",
    "sample",        "final_reason",      "verdict",     "correct", "speedup",
    "reward",        "request_id",        "turns",       "tokens",  "cost_usd",
    "active_s",      "evaluator_version", "finished_at", "round",   "seed_episode_id",
    "seed_model_id", "seed_speedup"};

std::string first_line(const std::string& s) {
  auto pos = s.find('\n');
  return pos == std::string::npos ? s : s.substr(0, pos);
}

std::string csv_cell(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : (v.is_null() ? "" : v.dump());
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void write_csv_row(std::ostream& out, const std::vector<std::string>& cols, const json& rec) {
  for (std::size_t i = 0; i < cols.size(); ++i) {
    if (i) out << ',';
    out << csv_cell(rec.contains(cols[i]) ? rec[cols[i]] : json(nullptr));
  }
  out << '\n';
}

}  // namespace

const std::vector<std::string>& run_describing_fields() {
  static const std::vector<std::string> k_fields = {
      "at",           "llm_latency_s", "llm_http_attempts", "llm_sends",
      "dup_possible", "active_s",      "finished_at"};
  return k_fields;
}

std::map<std::string, StrategyOrigin> strategy_origins(const std::vector<store::EventRow>& events) {
  std::map<std::string, StrategyOrigin> out;
  for (auto& ev : events) {
    if (ev.kind != "strategy") continue;
    auto d = json::parse(ev.detail, nullptr, false);
    if (!d.is_object() || !d.contains("episode") || !d["episode"].is_object()) continue;
    const auto& e = d["episode"];
    StrategyOrigin o;
    o.round = e.value("round", 0);
    if (e.contains("seed") && e["seed"].is_object()) {
      const auto& sd = e["seed"];
      o.seed_episode_id = sd.value("episode_id", "");
      o.seed_model_id = sd.value("model_id", "");
      if (sd.contains("speedup") && sd["speedup"].is_number())
        o.seed_speedup = sd["speedup"].get<double>();
    }
    out[ev.episode_id] = std::move(o);
  }
  return out;
}

Result<void> write_export(store::Store& store, const std::string& campaign_id, ExportFormat format,
                          std::ostream& out) {
  auto episodes = store.list_episodes(campaign_id);
  if (!episodes) return std::unexpected(episodes.error());
  auto turns = store.list_turns(campaign_id);
  if (!turns) return std::unexpected(turns.error());
  auto calls = store.list_llm_calls(campaign_id);
  if (!calls) return std::unexpected(calls.error());
  auto evals = store.list_evaluations(campaign_id);
  if (!evals) return std::unexpected(evals.error());
  auto finals = store.list_finals(campaign_id);
  if (!finals) return std::unexpected(finals.error());
  auto events = store.list_events(campaign_id);
  if (!events) return std::unexpected(events.error());
  const auto origins = strategy_origins(*events);

  std::map<std::string, const store::LlmCallRow*> call_by_id;
  for (auto& c : *calls) call_by_id[c.request_id] = &c;
  std::map<std::string, const store::EvaluationRow*> eval_by_id;
  for (auto& e : *evals) eval_by_id[e.request_id] = &e;
  std::map<std::string, const store::FinalRow*> final_by_ep;
  for (auto& f : *finals) final_by_ep[f.episode_id] = &f;
  std::map<std::string, std::vector<const store::TurnRow*>> turns_by_ep;
  for (auto& t : *turns) turns_by_ep[t.episode_id].push_back(&t);

  auto sorted = *episodes;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.id < b.id; });
  // CSV: one header, the union of attempt and episode columns.
  std::vector<std::string> csv_header = k_attempt_columns;
  for (auto& c : k_episode_columns) {
    if (std::find(csv_header.begin(), csv_header.end(), c) == csv_header.end())
      csv_header.push_back(c);
  }
  if (format == ExportFormat::csv) {
    for (std::size_t i = 0; i < csv_header.size(); ++i) out << (i ? "," : "") << csv_header[i];
    out << '\n';
  }
  auto emit = [&](const json& rec) {
    if (format == ExportFormat::jsonl) {
      out << rec.dump() << '\n';
    } else {
      write_csv_row(out, csv_header, rec);
    }
  };
  for (auto& ep : sorted) {
    auto& ts = turns_by_ep[ep.id];
    std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->turn < b->turn; });
    for (auto* t : ts) {
      json rec = identity("attempt", campaign_id, ep);
      rec["turn"] = t->turn;
      rec["turn_model"] = t->model_id;
      rec["action"] = t->action;
      rec["parse_status"] = t->parse_status;
      rec["code_sha"] = t->code_sha;
      rec["eval_request_id"] = t->eval_request_id;
      rec["eval_status"] = t->eval_status;
      rec["check_correct"] = nullptr;
      rec["check_max_abs_diff"] = nullptr;
      rec["check_error"] = "";
      if (auto it = eval_by_id.find(t->eval_request_id); it != eval_by_id.end()) {
        auto rep = json::parse(it->second->report_json, nullptr, false);
        if (rep.is_object()) {
          rec["check_correct"] = rep.value("correct", false);
          rec["check_max_abs_diff"] =
              rep.contains("max_abs_diff") ? rep["max_abs_diff"] : json(nullptr);
          rec["check_error"] = first_line(rep.value("error", ""));
        }
      }
      rec["finish_reason"] = t->finish_reason;
      rec["prompt_tokens"] = t->prompt_tokens;
      rec["completion_tokens"] = t->completion_tokens;
      rec["llm_latency_s"] = t->llm_latency_s;
      auto call = call_by_id.find(t->llm_request_id);
      rec["llm_http_attempts"] = call != call_by_id.end() ? call->second->http_attempts : 0;
      rec["llm_sends"] = call != call_by_id.end() ? call->second->sends : 0;
      rec["dup_possible"] = call != call_by_id.end() && call->second->dup_possible;
      rec["at"] = t->at;
      rec["code"] = t->code;
      emit(rec);
    }
    json rec = identity("episode", campaign_id, ep);
    auto fin = final_by_ep.find(ep.id);
    rec["final_reason"] = fin != final_by_ep.end()
                              ? json(std::string(store::to_string(fin->second->reason)))
                              : json(nullptr);
    rec["verdict"] = fin != final_by_ep.end() ? json(fin->second->verdict) : json(nullptr);
    rec["correct"] = fin != final_by_ep.end() && fin->second->correct;
    rec["speedup"] = fin != final_by_ep.end() && fin->second->speedup ? json(*fin->second->speedup)
                                                                      : json(nullptr);
    rec["reward"] = fin != final_by_ep.end() ? fin->second->reward : 0.0;
    rec["request_id"] = fin != final_by_ep.end() ? fin->second->request_id : "";
    rec["turns"] = ts.size();
    rec["tokens"] = ep.tokens_used;
    rec["cost_usd"] = ep.cost_usd;
    rec["active_s"] = ep.active_s;
    std::string version;
    if (fin != final_by_ep.end()) {
      if (auto it = eval_by_id.find(fin->second->request_id); it != eval_by_id.end()) {
        version = it->second->evaluator_version;
      }
    }
    rec["evaluator_version"] = version;
    rec["finished_at"] = fin != final_by_ep.end() ? json(fin->second->at) : json(nullptr);
    auto origin = origins.find(ep.id);
    const StrategyOrigin o = origin != origins.end() ? origin->second : StrategyOrigin{};
    rec["round"] = o.round;
    rec["seed_episode_id"] = o.seed_episode_id.empty() ? json(nullptr) : json(o.seed_episode_id);
    rec["seed_model_id"] = o.seed_model_id.empty() ? json(nullptr) : json(o.seed_model_id);
    rec["seed_speedup"] = o.seed_speedup ? json(*o.seed_speedup) : json(nullptr);
    emit(rec);
  }
  if (!out) return fail("export: write failed");
  return {};
}

}  // namespace korch::reports
