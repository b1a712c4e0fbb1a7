#pragma once
// A served campaign's two words: the state its owner wants (persisted in the
// daemon's state directory, changed by pause/resume/cancel and by completion)
// and the phase its driving thread is in now (in memory only). The API and
// the metrics show them by the names below.
#include <string_view>
#include <utility>

#include "util/enum_names.hpp"

namespace korch::daemon {

enum class CampaignState { active, paused, cancelled, completed };

enum class DrivePhase { queued, running, stopping, idle, aborted, invalid };

}  // namespace korch::daemon

namespace korch {
template <>
struct EnumNames<daemon::CampaignState> {
  static constexpr std::pair<daemon::CampaignState, std::string_view> k_names[] = {
      {daemon::CampaignState::active, "active"},
      {daemon::CampaignState::paused, "paused"},
      {daemon::CampaignState::cancelled, "cancelled"},
      {daemon::CampaignState::completed, "completed"}};
};
template <>
struct EnumNames<daemon::DrivePhase> {
  static constexpr std::pair<daemon::DrivePhase, std::string_view> k_names[] = {
      {daemon::DrivePhase::queued, "queued"},     {daemon::DrivePhase::running, "running"},
      {daemon::DrivePhase::stopping, "stopping"}, {daemon::DrivePhase::idle, "idle"},
      {daemon::DrivePhase::aborted, "aborted"},   {daemon::DrivePhase::invalid, "invalid"}};
};
}  // namespace korch

namespace korch::daemon {

// (plain overloads, not a template: a template here and store's would both
// match a store enum inside this namespace)
constexpr std::string_view to_string(CampaignState s) { return enum_name(s); }
constexpr std::string_view to_string(DrivePhase p) { return enum_name(p); }

}  // namespace korch::daemon
