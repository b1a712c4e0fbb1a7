#include "agent/reply_parser.hpp"
#include "util/strings.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace korch::agent {
namespace {

// A fence line opening a python block: ```python, ```py, ```Python3 ...
bool is_python_fence(std::string_view line) {
  auto t = trim(line);
  if (!t.starts_with("```")) return false;
  auto lang = lower(trim(t.substr(3)));
  return lang == "python" || lang == "py" || lang == "python3";
}

bool is_fence(std::string_view line) { return trim(line).starts_with("```"); }

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    auto line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == text.size()) break;
    start = end + 1;
  }
  return lines;
}

bool defines_model_new(std::string_view code) {
  for (auto line : split_lines(code)) {
    auto t = trim(line);
    if (t.starts_with("class ModelNew") && t.size() > 14 &&
        (t[14] == '(' || t[14] == ':' || t[14] == ' ')) {
      return true;
    }
  }
  return false;
}

}  // namespace

const char* to_string(Action a) { return a == Action::submit ? "submit" : "check"; }

namespace {

// A python block that never closes on a line of its own, but whose code line
// ends in the fence (`    return out````, as published replies have it):
// the reply with that fence moved to a line of its own, or "" when there is
// no such line.
std::string with_glued_fence_split(std::string_view reply) {
  bool in_block = false, python = false;
  std::size_t glued = std::string_view::npos;  // offset of the glued fence
  std::size_t pos = 0;
  for (auto line : split_lines(reply)) {
    const std::size_t at = pos;
    pos += line.size() + 1;
    if (!in_block) {
      if (is_fence(line)) {
        in_block = true;
        python = is_python_fence(line);
        glued = std::string_view::npos;
      }
      continue;
    }
    const auto t = trim(line);
    if (t == "```") {
      in_block = false;
      continue;
    }
    if (python && glued == std::string_view::npos && t.size() > 3 && t.ends_with("```"))
      glued = at + line.rfind("```");
  }
  if (!in_block || !python || glued == std::string_view::npos) return "";
  std::string out(reply.substr(0, glued));
  out += "\n```";
  out += reply.substr(glued + 3);
  return out;
}

}  // namespace

ParsedReply parse_reply(std::string_view reply) {
  ParsedReply out;
  auto lines = split_lines(reply);
  std::vector<std::string> blocks;
  bool in_block = false;
  bool block_is_python = false;
  std::string current;
  for (auto line : lines) {
    if (!in_block) {
      if (is_fence(line)) {
        in_block = true;
        block_is_python = is_python_fence(line);
        current.clear();
        continue;
      }
      auto t = trim(line);
      // ACTION lines are read outside code blocks only.
      auto upper_prefix = lower(t.substr(0, std::min<std::size_t>(t.size(), 7)));
      if (upper_prefix == "action:") {
        auto value = lower(trim(t.substr(7)));
        // Tolerate markdown decoration such as **SUBMIT** or `CHECK`.
        value.erase(std::remove_if(value.begin(), value.end(),
                                   [](char c) { return c == '*' || c == '`' || c == '.'; }),
                    value.end());
        if (value == "submit") {
          out.action = Action::submit;
          out.explicit_action = true;
        } else if (value == "check") {
          out.action = Action::check;
          out.explicit_action = true;
        }
      }
    } else {
      if (trim(line) == "```") {
        in_block = false;
        if (block_is_python) blocks.push_back(current);
        continue;
      }
      current.append(line);
      current.push_back('\n');
    }
  }
  if (in_block && block_is_python) {
    // Only where the block would otherwise be lost: a fence glued to the
    // end of a code line closes it.
    if (const std::string fixed = with_glued_fence_split(reply); !fixed.empty())
      return parse_reply(fixed);
    out.unterminated_block = true;
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (defines_model_new(*it)) {
      out.code = *it;
      out.has_code = true;
      return out;
    }
  }
  if (!blocks.empty()) {
    out.code = blocks.back();
    out.has_code = true;
  }
  return out;
}

}  // namespace korch::agent
