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
KORCH_ENUM_NAMES(daemon::CampaignState, active, paused, cancelled, completed);
KORCH_ENUM_NAMES(daemon::DrivePhase, queued, running, stopping, idle, aborted, invalid);
}  // namespace korch

namespace korch::daemon {

// (plain overloads, not a template: a template here and store's would both
// match a store enum inside this namespace)
constexpr std::string_view to_string(CampaignState s) { return enum_name(s); }
constexpr std::string_view to_string(DrivePhase p) { return enum_name(p); }

}  // namespace korch::daemon
