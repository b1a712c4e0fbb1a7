#pragma once
// Deterministic identifiers (DESIGN §2, §3). The same inputs always give the
// same id, so re-submitting a campaign or resuming an episode never creates
// duplicates and every retried request carries the id of the original.
#include <cstdint>
#include <string>
#include <string_view>

namespace korch::ids {

// Campaign id: "c-" + sha256(name)[:16].
std::string campaign_id(std::string_view campaign_name);

// Episode id: "e-" + sha256(campaign|task|model|sample)[:24].
std::string episode_id(std::string_view campaign_id, std::string_view task_id,
                       std::string_view model_id, int sample_index);

// sha256(code)[:24], the code part of evaluation request ids.
std::string code_digest(std::string_view code);

// LLM call id: "llm|<episode>|<turn>|<model>".
std::string llm_request_id(std::string_view episode_id, int turn, std::string_view model_id);

// Protected submission: "kernel|<episode>|<sha256(code)[:24]>".
std::string submit_request_id(std::string_view episode_id, std::string_view code);

// Unprotected check: "check|<episode>|<turn>|<sha256(code)[:24]>".
std::string check_request_id(std::string_view episode_id, int turn, std::string_view code);

// The same ids from a digest already taken (code_digest), for callers that
// hash a candidate once and name it in several rows.
std::string submit_request_id_of_digest(std::string_view episode_id, std::string_view digest);
std::string check_request_id_of_digest(std::string_view episode_id, int turn,
                                       std::string_view digest);

// One-off evaluation of the API (POST /api/evaluate, no episode):
// "api|<mode>|<task>|<sha256(code)[:24]>"; mode is check or submit.
std::string api_request_id_of_digest(std::string_view mode, std::string_view task_id,
                                     std::string_view digest);

// A 64-bit value derived from a string (first 8 bytes of its sha256), for
// seeding deterministic generators.
std::uint64_t stable_hash64(std::string_view data);

}  // namespace korch::ids
