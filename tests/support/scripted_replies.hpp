#pragma once
// Deterministic model replies for the fake OpenAI-compatible servers. A reply
// depends only on the model name and the conversation received, so a resumed
// episode (which re-sends a byte-identical conversation) gets the same reply
// an uninterrupted run got. Owned by the agent work; used by the fake server.
#include <cstdint>
#include <string>
#include <vector>

#include "llm_clients/client.hpp"
#include "util/error.hpp"

namespace korch::testing {

struct ScriptedReply {
  std::string content;
  std::string finish_reason = "stop";
  std::string reasoning;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

// The "kernel" script: replies shaped like a kernel-writing agent's (a python
// block defining ModelNew and an ACTION line), with a deterministic mix of
// CHECK, SUBMIT, no-code and truncated (finish_reason=length) replies.
ScriptedReply kernel_script_reply(const std::string& model,
                                  const std::vector<llm::Message>& messages);

// The "refine" script, for strategy benchmarks and tests: one SUBMIT per
// episode whose code carries the markers `# MOCK_SPEEDUP: <x>` and, when it is
// meant to fail, `# MOCK_VERDICT: incorrect` (the mock evaluator reads
// both). Without a seed kernel in the conversation, 35% of replies fail and
// the rest run at 0.60x-1.19x (from the conversation's hash); given a seed
// ("... a measured speedup of <x>x ...", agent/strategy.cpp's seed block) the
// reply always passes and runs at 1.2 times the seed's speedup. Usage is fixed
// (1000 prompt, 200 completion tokens) so every call costs the same.
// `request_id` (the X-Request-Id, llm|<episode>|<turn>|<model>) enters the
// draw, so samples of one task whose conversations are the same still differ,
// as sampled replies of a real model do; without it they are identical.
ScriptedReply refine_script_reply(const std::string& model,
                                  const std::vector<llm::Message>& messages,
                                  const std::string& request_id = "");

// Recorded replies, looked up by task and turn: a JSON file
// {"replies":[{"task":"19_ReLU","turn":1,"content":"..."}], "default":"..."}.
// `task` is matched as a substring of the first user message that contains a
// task prompt; `turn` is the episode's turn that `request_id` names
// (llm|<episode>|<turn>|<model>: right across a compaction, which drops the
// earlier replies), else the number of assistant messages + 1. The entry of
// that turn, else of the latest recorded turn before it: a script may repeat
// a code (CHECK it, then SUBMIT it), as a model does.
class ReplayScript {
 public:
  static Result<ReplayScript> load(const std::string& path);
  ScriptedReply reply(const std::string& model, const std::vector<llm::Message>& messages,
                      const std::string& request_id = "") const;

 private:
  struct Entry {
    std::string task;
    int turn = 0;
    std::string content;
  };
  std::vector<Entry> m_entries;
  std::string m_default;
};

}  // namespace korch::testing
