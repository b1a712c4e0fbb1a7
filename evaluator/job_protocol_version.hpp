#pragma once
// The job protocol's version (evaluator/job_protocol.hpp), in a header of its
// own so korch-worker can check it without the daemon's types.
#include "evaluator/protocol_schema.hpp"

namespace korch::evaluator::protocol {
inline constexpr int k_version = schema::k_job_protocol;  // evaluator/protocol/protocol.json
}  // namespace korch::evaluator::protocol
