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

// The code a reply yields: `code`, or none where it is nullptr.
struct CodeCase {
  const char* name;
  const char* reply;
  const char* code;
};

std::ostream& operator<<(std::ostream& os, const CodeCase& c) { return os << c.name; }

class ReplyCode : public ::testing::TestWithParam<CodeCase> {};

TEST_P(ReplyCode, IsTheRightBlock) {
  const CodeCase& c = GetParam();
  auto r = parse_reply(c.reply);
  ASSERT_EQ(r.has_code, c.code != nullptr);
  if (c.code) {
    EXPECT_EQ(r.code, c.code);
  }
}

INSTANTIATE_TEST_SUITE_P(
    ReplyParser, ReplyCode,
    ::testing::Values(
        CodeCase{"LastPythonBlockWhenNoneDefinesModelNew",
                 "```python\nx = 1\n```\n```py\nx = 2\n```\n", "x = 2\n"},
        CodeCase{"NonPythonBlocksAreNotCode",
                 "```cpp\nint main() {}\n```\n```\nplain\n```\nACTION: CHECK", nullptr},
        // A block closed on a line of its own keeps a ``` inside a string
        // (FenceGluedToTheLastCodeLineClosesTheBlock).
        CodeCase{"FenceInsideAStringStaysCode",
                 "```python\nclass ModelNew:\n    s = \"x```\"\n    t = 'y```'\n```\n",
                 "class ModelNew:\n    s = \"x```\"\n    t = 'y```'\n"}),
    [](const auto& info) { return std::string(info.param.name); });

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

// Published replies sometimes end the code with the fence on its last line
// (`return x```` and then the ACTION line). The block is not lost: the fence
// closes it, and the ACTION after it counts (a ``` inside a string, in a
// block closed on a line of its own: ReplyCode's FenceInsideAStringStaysCode).
TEST(ReplyParser, FenceGluedToTheLastCodeLineClosesTheBlock) {
  auto r = parse_reply(
      "Here.\n\n```python\nclass ModelNew:\n    def forward(self, x):\n        return x```\n\n"
      "ACTION: SUBMIT\n");
  EXPECT_TRUE(r.has_code);
  EXPECT_FALSE(r.unterminated_block);
  EXPECT_EQ(r.code, "class ModelNew:\n    def forward(self, x):\n        return x\n");
  EXPECT_EQ(r.action, Action::submit);
  EXPECT_TRUE(r.explicit_action);
}

TEST(ReplyParser, CrlfLineEndings) {
  auto r = parse_reply("```python\r\nclass ModelNew:\r\n    pass\r\n```\r\nACTION: SUBMIT\r\n");
  ASSERT_TRUE(r.has_code);
  EXPECT_EQ(r.action, Action::submit);
}
