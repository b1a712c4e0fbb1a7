#pragma once
// The job protocol's version (evaluator/job_protocol.hpp), in a header of its
// own so korch-worker can check it without the daemon's types.
namespace korch::evaluator::protocol {
inline constexpr int k_version = 1;
}  // namespace korch::evaluator::protocol
