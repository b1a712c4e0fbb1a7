#include "tests/support/scripted_replies.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/fs.hpp"
#include "util/ids.hpp"

namespace korch::testing {
namespace {

// Shares of the kernel script's replies, in percent (deterministic per
// conversation): the rest are code with ACTION: CHECK.
constexpr int k_no_code_pct = 8;
constexpr int k_truncated_pct = 5;
constexpr int k_submit_pct = 30;
constexpr int k_failing_pct = 25;  // codes the mock evaluator fails

std::int64_t approx_tokens(std::size_t chars) { return static_cast<std::int64_t>(chars / 4 + 1); }

std::string conversation_key(const std::string& model, const std::vector<llm::Message>& messages) {
  std::string key = model;
  for (auto& m : messages) {
    key += '\x1f';
    key += m.role;
    key += '\x1e';
    key += m.content;
  }
  return key;
}

int assistant_count(const std::vector<llm::Message>& messages) {
  int n = 0;
  for (auto& m : messages) n += m.role == "assistant";
  return n;
}

std::string kernel_code(std::uint64_t h, bool failing) {
  return fmt::format(
      "import torch\n"
      "import torch.nn as nn\n"
      "from torch.utils.cpp_extension import load_inline\n\n"
      "# variant {:016x}\n"
      "{}"
      "cpp_src = \"torch::Tensor fwd(torch::Tensor x) {{ return x.clone(); }}\"\n"
      "ext = load_inline(name=\"k_{:08x}\", cpp_sources=cpp_src, functions=[\"fwd\"])\n\n"
      "class ModelNew(nn.Module):\n"
      "    def __init__(self, *args):\n"
      "        super().__init__()\n\n"
      "    def forward(self, *inputs):\n"
      "        return ext.fwd(inputs[0])\n",
      h, failing ? "# MOCK_VERDICT: incorrect\n" : "", static_cast<std::uint32_t>(h));
}

}  // namespace

ScriptedReply kernel_script_reply(const std::string& model,
                                  const std::vector<llm::Message>& messages) {
  auto key = conversation_key(model, messages);
  auto h = ids::stable_hash64(key);
  int roll = static_cast<int>(h % 100);
  int turn = assistant_count(messages) + 1;
  ScriptedReply r;
  std::size_t prompt_chars = key.size();
  if (roll < k_no_code_pct) {
    r.content = fmt::format(
        "Turn {}: let me think about the memory access pattern first. "
        "I will write the kernel in my next reply.",
        turn);
  } else if (roll < k_no_code_pct + k_truncated_pct) {
    r.content = "Here is the kernel:\n\n```python\n" + kernel_code(h, false).substr(0, 120);
    r.finish_reason = "length";
  } else {
    bool submit = static_cast<int>((h >> 16) % 100) < k_submit_pct;
    bool failing = static_cast<int>((h >> 24) % 100) < k_failing_pct;
    r.content = fmt::format("Turn {}: a fused kernel.\n\n```python\n{}```\n\nACTION: {}\n", turn,
                            kernel_code(h, failing), submit ? "SUBMIT" : "CHECK");
  }
  r.reasoning = (h >> 32) % 3 == 0 ? fmt::format("reasoning for turn {}", turn) : "";
  r.prompt_tokens = approx_tokens(prompt_chars);
  r.completion_tokens = approx_tokens(r.content.size());
  return r;
}

ScriptedReply refine_script_reply(const std::string& model,
                                  const std::vector<llm::Message>& messages,
                                  const std::string& request_id) {
  constexpr std::string_view k_seed_marker = "a measured speedup of ";
  constexpr int k_fail_pct = 35;
  constexpr double k_improvement = 1.2;
  auto h = ids::stable_hash64(conversation_key(model, messages) + '\x1d' + request_id);
  std::optional<double> seed;
  for (auto& m : messages) {
    if (m.role != "user") continue;
    if (auto pos = m.content.find(k_seed_marker); pos != std::string::npos)
      seed = std::strtod(m.content.c_str() + pos + k_seed_marker.size(), nullptr);
  }
  bool failing = !seed && static_cast<int>(h % 100) < k_fail_pct;
  double speedup = seed ? *seed * k_improvement : 0.6 + static_cast<double>((h >> 8) % 60) / 100.0;
  ScriptedReply r;
  r.content = fmt::format(
      "{}\n\n```python\nimport torch\nimport torch.nn as nn\n\n# variant {:016x}\n"
      "# MOCK_SPEEDUP: {:.4f}\n{}"
      "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n```\n\n"
      "ACTION: SUBMIT\n",
      seed ? "Improving the seed kernel." : "A first kernel.", h, speedup,
      failing ? "# MOCK_VERDICT: incorrect\n" : "");
  r.prompt_tokens = 1000;
  r.completion_tokens = 200;
  return r;
}

Result<ReplayScript> ReplayScript::load(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(path + ": not a JSON object");
  ReplayScript script;
  try {
    for (auto& e : j.value("replies", nlohmann::json::array())) {
      script.m_entries.push_back(Entry{e.at("task").get<std::string>(), e.at("turn").get<int>(),
                                       e.at("content").get<std::string>()});
    }
    script.m_default =
        j.value("default", "I could not find a recorded reply for this conversation.");
  } catch (const nlohmann::json::exception& e) {
    return fail(path + ": " + e.what());
  }
  return script;
}

ScriptedReply ReplayScript::reply(const std::string& model,
                                  const std::vector<llm::Message>& messages,
                                  const std::string& request_id) const {
  int turn = assistant_count(messages) + 1;
  // llm|<episode>|<turn>|<model>[|compacted]
  if (request_id.starts_with("llm|")) {
    auto a = request_id.find('|', 4);
    auto b = a == std::string::npos ? a : request_id.find('|', a + 1);
    if (b != std::string::npos) turn = std::atoi(request_id.substr(a + 1, b - a - 1).c_str());
  }
  std::string task_text;
  for (auto& m : messages) {
    if (m.role == "user" && m.content.find("The reference implementation") != std::string::npos) {
      task_text = m.content;
      break;
    }
  }
  ScriptedReply r;
  r.content = m_default;
  const Entry* best = nullptr;
  for (auto& e : m_entries) {
    if (task_text.find(e.task) == std::string::npos) continue;
    // The entry for this turn, else the latest recorded turn before it.
    if (e.turn <= turn && (!best || e.turn > best->turn)) best = &e;
  }
  if (best) r.content = best->content;
  r.prompt_tokens = approx_tokens(conversation_key(model, messages).size());
  r.completion_tokens = approx_tokens(r.content.size());
  return r;
}

}  // namespace korch::testing
