#pragma once
// Parsing of a model reply (DESIGN §2 rule 2): the code is the last complete
// ```python block that defines ModelNew, else the last complete python block;
// the action is the last `ACTION:` line (default CHECK). An unterminated block
// (a reply cut off by max_tokens) is not code.
#include <string>
#include <string_view>

namespace korch::agent {

enum class Action { check, submit };

struct ParsedReply {
  bool has_code = false;
  std::string code;
  Action action = Action::check;
  bool explicit_action = false;     // an ACTION: line was present
  bool unterminated_block = false;  // a ```python block was opened but never closed
};

ParsedReply parse_reply(std::string_view reply);

const char* to_string(Action a);

}  // namespace korch::agent
