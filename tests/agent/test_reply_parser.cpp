// DESIGN §2 rule 2: which block is the code, which line is the action.
#include <gtest/gtest.h>

#include "agent/reply_parser.hpp"

using korch::agent::Action;
using korch::agent::parse_reply;

TEST(ReplyParser, LastBlockDefiningModelNewWins) {
  auto r = parse_reply(
      "```python\nclass ModelNew(nn.Module):\n    a = 1\n```\n"
      "text\n```python\nclass ModelNew(nn.Module):\n    a = 2\n```\n"
      "```python\nprint('helper, no ModelNew')\n```\nACTION: SUBMIT\n");
  ASSERT_TRUE(r.has_code);
  EXPECT_NE(r.code.find("a = 2"), std::string::npos);
  EXPECT_EQ(r.action, Action::submit);
}

TEST(ReplyParser, LastPythonBlockWhenNoneDefinesModelNew) {
  auto r = parse_reply("```python\nx = 1\n```\n```py\nx = 2\n```\n");
  ASSERT_TRUE(r.has_code);
  EXPECT_EQ(r.code, "x = 2\n");
}

TEST(ReplyParser, NonPythonBlocksAreNotCode) {
  auto r = parse_reply("```cpp\nint main() {}\n```\n```\nplain\n```\nACTION: CHECK");
  EXPECT_FALSE(r.has_code);
}

TEST(ReplyParser, LastActionLineWinsAndDefaultIsCheck) {
  EXPECT_EQ(parse_reply("```python\nclass ModelNew: pass\n```\n").action, Action::check);
  EXPECT_FALSE(parse_reply("```python\nclass ModelNew: pass\n```\n").explicit_action);
  auto r = parse_reply("ACTION: SUBMIT\n```python\nclass ModelNew: pass\n```\nACTION: CHECK\n");
  EXPECT_EQ(r.action, Action::check);
  EXPECT_EQ(parse_reply("```python\nclass ModelNew: pass\n```\naction: **submit**").action,
            Action::submit);
}

TEST(ReplyParser, ActionInsideCodeIsIgnored) {
  auto r = parse_reply("```python\nclass ModelNew: pass\n# ACTION: SUBMIT\n```\n");
  EXPECT_EQ(r.action, Action::check);
}

TEST(ReplyParser, UnterminatedBlockIsNotCode) {
  auto r = parse_reply("Here:\n```python\nclass ModelNew(nn.Module):\n    def forward(self");
  EXPECT_FALSE(r.has_code);
  EXPECT_TRUE(r.unterminated_block);
}

TEST(ReplyParser, CrlfLineEndings) {
  auto r = parse_reply("```python\r\nclass ModelNew:\r\n    pass\r\n```\r\nACTION: SUBMIT\r\n");
  ASSERT_TRUE(r.has_code);
  EXPECT_EQ(r.action, Action::submit);
}
