// PLACEHOLDER for tests/support/scripted_replies.cpp (owned by the lead),
// compiled only while that file does not exist (see CMakeLists.txt). Minimal
// deterministic behaviour so the fake servers build and run.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/scripted_replies.hpp"

namespace korch::testing {

ScriptedReply kernel_script_reply(const std::string& model, const std::vector<llm::Message>& messages) {
  ScriptedReply r;
  r.content =
      "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
      "        return torch.relu(x)\n```\nACTION: SUBMIT\n";
  (void)model;
  (void)messages;
  return r;
}

Result<ReplayScript> ReplayScript::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("cannot open replay script " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  auto j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("replay script is not a JSON object: " + path);
  ReplayScript script;
  for (const auto& e : j.value("replies", nlohmann::json::array())) {
    script.m_entries.push_back({e.value("task", ""), e.value("turn", 0), e.value("content", "")});
  }
  script.m_default = j.value("default", "");
  return script;
}

ScriptedReply ReplayScript::reply(const std::string&, const std::vector<llm::Message>& messages) const {
  int turn = 1;
  std::string task_prompt;
  for (const auto& m : messages) {
    if (m.role == "assistant") ++turn;
    if (m.role == "user" && task_prompt.empty()) task_prompt = m.content;
  }
  ScriptedReply r;
  r.content = m_default;
  for (const auto& e : m_entries) {
    if (e.turn == turn && task_prompt.find(e.task) != std::string::npos) {
      r.content = e.content;
      break;
    }
  }
  return r;
}

}  // namespace korch::testing
