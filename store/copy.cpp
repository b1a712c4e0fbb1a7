#include "store/copy.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace korch::store {
namespace {

// Groups `rows` by their episode_id.
template <typename Row>
std::map<std::string, std::vector<Row>> by_episode(std::vector<Row> rows) {
  std::map<std::string, std::vector<Row>> out;
  for (auto& r : rows) out[r.episode_id].push_back(std::move(r));
  return out;
}

template <typename Row>
void put_all(WriteBatch& b, std::map<std::string, std::vector<Row>>& rows, const std::string& id,
             std::int64_t& count) {
  auto it = rows.find(id);
  if (it == rows.end()) return;
  for (auto& r : it->second) {
    b.put(std::move(r));
    ++count;
  }
}

#define KORCH_TRY_ASSIGN(var, expr) \
  auto var = (expr);                \
  if (!var) return std::unexpected(prefixed(var.error(), campaign.id))

Error prefixed(Error e, const std::string& campaign_id) {
  e.message = "campaign " + campaign_id + ": " + e.message;
  return e;
}

Result<void> copy_one(Store& from, Store& to, const CampaignRow& campaign, CopyStats& stats) {
  KORCH_TRY_ASSIGN(existing, to.get_campaign(campaign.id));
  if (*existing)
    return fail(ErrorKind::invalid, "campaign " + campaign.id + " (" + campaign.name +
                                        ") is already in the destination; nothing copied");
  KORCH_TRY_ASSIGN(tasks, from.list_tasks(campaign.id));
  KORCH_TRY_ASSIGN(episodes, from.list_episodes(campaign.id));
  KORCH_TRY_ASSIGN(messages, from.list_messages(campaign.id));
  KORCH_TRY_ASSIGN(turns, from.list_turns(campaign.id));
  KORCH_TRY_ASSIGN(calls, from.list_llm_calls(campaign.id));
  KORCH_TRY_ASSIGN(evaluations, from.list_evaluations(campaign.id));
  KORCH_TRY_ASSIGN(events, from.list_events(campaign.id));
  KORCH_TRY_ASSIGN(finals, from.list_finals(campaign.id));

  WriteBatch head;
  head.put(campaign);
  ++stats.rows;
  for (auto& t : *tasks) {
    head.put(std::move(t));
    ++stats.rows;
  }
  if (auto r = to.commit_sync(std::move(head)); !r)
    return std::unexpected(prefixed(r.error(), campaign.id));

  auto messages_of = by_episode(std::move(*messages));
  auto turns_of = by_episode(std::move(*turns));
  auto calls_of = by_episode(std::move(*calls));
  auto evaluations_of = by_episode(std::move(*evaluations));
  auto finals_of = by_episode(std::move(*finals));
  for (const auto& summary : *episodes) {
    // The full row (its system prompt) and its live state.
    KORCH_TRY_ASSIGN(snapshot, from.load_episode(summary.id));
    if (!*snapshot)
      return fail("campaign " + campaign.id + ": episode " + summary.id +
                  " vanished while copying");
    WriteBatch b;
    // The episode row as it is (a final one stays final; its final row
    // below then leaves updated_at alone).
    b.put((*snapshot)->episode);
    ++stats.rows;
    put_all(b, messages_of, summary.id, stats.rows);
    put_all(b, turns_of, summary.id, stats.rows);
    put_all(b, calls_of, summary.id, stats.rows);
    put_all(b, evaluations_of, summary.id, stats.rows);
    put_all(b, finals_of, summary.id, stats.rows);
    auto r = to.commit_sync(std::move(b));
    if (!r) return std::unexpected(prefixed(r.error(), campaign.id));
    if (!r->conflicts.empty())
      return fail("campaign " + campaign.id + ": episode " + summary.id + ": " +
                  r->conflicts.front());
    ++stats.episodes;
  }
  // Events last, in the source's order (their ids are insertion order, and
  // list_events reads them by id across episodes).
  constexpr std::size_t k_events_per_batch = 4096;
  for (std::size_t i = 0; i < events->size(); i += k_events_per_batch) {
    WriteBatch b;
    for (std::size_t j = i; j < std::min(events->size(), i + k_events_per_batch); ++j) {
      b.put(std::move((*events)[j]));
      ++stats.rows;
    }
    if (auto r = to.commit_sync(std::move(b)); !r)
      return std::unexpected(prefixed(r.error(), campaign.id));
  }
  ++stats.campaigns;
  return {};
}

#undef KORCH_TRY_ASSIGN

}  // namespace

Result<CopyStats> copy_campaigns(Store& from, Store& to, const std::string& campaign_id) {
  CopyStats stats;
  std::vector<CampaignRow> campaigns;
  if (campaign_id.empty()) {
    auto all = from.list_campaigns();
    if (!all) return std::unexpected(all.error());
    campaigns = std::move(*all);
  } else {
    auto one = from.get_campaign(campaign_id);
    if (!one) return std::unexpected(one.error());
    if (!*one) return fail(ErrorKind::invalid, "no campaign " + campaign_id + " in the source");
    campaigns.push_back(std::move(**one));
  }
  for (const auto& c : campaigns) {
    if (auto r = copy_one(from, to, c, stats); !r) return std::unexpected(r.error());
  }
  return stats;
}

}  // namespace korch::store
