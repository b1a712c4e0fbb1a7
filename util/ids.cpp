#include "util/ids.hpp"

#include <fmt/format.h>

#include "util/sha256.hpp"

namespace korch::ids {

std::string campaign_id(std::string_view campaign_name) {
  return "c-" + sha256_hex(campaign_name).substr(0, 16);
}

std::string episode_id(std::string_view campaign_id, std::string_view task_id,
                       std::string_view model_id, int sample_index) {
  auto key = fmt::format("{}|{}|{}|{}", campaign_id, task_id, model_id, sample_index);
  return "e-" + sha256_hex(key).substr(0, 24);
}

std::string code_digest(std::string_view code) { return sha256_hex(code).substr(0, 24); }

std::string llm_request_id(std::string_view episode_id, int turn, std::string_view model_id) {
  return fmt::format("llm|{}|{}|{}", episode_id, turn, model_id);
}

std::string submit_request_id_of_digest(std::string_view episode_id, std::string_view digest) {
  return fmt::format("kernel|{}|{}", episode_id, digest);
}

std::string api_request_id_of_digest(std::string_view mode, std::string_view task_id,
                                     std::string_view digest) {
  return fmt::format("api|{}|{}|{}", mode, task_id, digest);
}

std::string check_request_id_of_digest(std::string_view episode_id, int turn,
                                       std::string_view digest) {
  return fmt::format("check|{}|{}|{}", episode_id, turn, digest);
}

std::string submit_request_id(std::string_view episode_id, std::string_view code) {
  return submit_request_id_of_digest(episode_id, code_digest(code));
}

std::string check_request_id(std::string_view episode_id, int turn, std::string_view code) {
  return check_request_id_of_digest(episode_id, turn, code_digest(code));
}

std::uint64_t stable_hash64(std::string_view data) {
  auto hex = sha256_hex(data);
  return std::stoull(hex.substr(0, 16), nullptr, 16);
}

}  // namespace korch::ids
