// Tests of the wire format: request bodies, completions, SSE parsing and
// stream assembly (llm_clients/openai_wire.hpp).
#include "llm_clients/openai_wire.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "tests/llm_clients/client_test_util.hpp"

namespace korch::llm {
namespace {

TEST(RequestBody, CarriesModelSettingsAndStreamOptions) {
  config::ModelConfig m;
  m.model = "gpt-x";
  m.temperature = 0.7;
  m.top_p = 0.9;
  m.max_tokens = 123;
  m.stream = true;
  auto j = nlohmann::json::parse(build_request_body(m, {{"system", "s"}, {"user", "u \"q\""}}));
  EXPECT_EQ(j["model"], "gpt-x");
  EXPECT_EQ(j["messages"].size(), 2u);
  EXPECT_EQ(j["messages"][1]["content"], "u \"q\"");
  EXPECT_DOUBLE_EQ(j["temperature"].get<double>(), 0.7);
  EXPECT_EQ(j["max_tokens"], 123);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  m.stream = false;
  j = nlohmann::json::parse(build_request_body(m, {}));
  EXPECT_FALSE(j.contains("stream_options"));
}

// The body is written without a DOM for the messages; it must be byte for
// byte what dumping the whole body as one nlohmann value gives (the old
// implementation, kept here as the reference), for every kind of content:
// quotes, backslashes, every control character, DEL, multi-byte UTF-8, and
// invalid UTF-8 (replaced by U+FFFD the way nlohmann replaces it).
std::string reference_body(const config::ModelConfig& model, const std::vector<Message>& messages) {
  nlohmann::json body;
  body["model"] = model.model;
  nlohmann::json msgs = nlohmann::json::array();
  for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  body["messages"] = std::move(msgs);
  body["temperature"] = model.temperature;
  body["top_p"] = model.top_p;
  if (model.max_tokens > 0) body["max_tokens"] = model.max_tokens;
  body["stream"] = model.stream;
  if (model.stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(RequestBody, BytesEqualTheOneValueDumpForAnyContent) {
  std::vector<std::string> contents = {"",
                                       "plain",
                                       "quote \" and backslash \\ and slash /",
                                       "tab\tnl\ncr\rbs\bff\f",
                                       "del \x7f",
                                       "ünïcödé ✓ 𝄞 日本",
                                       "\xff bad",
                                       "trunc \xe2\x82",
                                       "overlong \xc0\xaf",
                                       "surrogate \xed\xa0\x80",
                                       "above \xf4\x90\x80\x80",
                                       "ok \xf4\x8f\xbf\xbf end"};
  std::string all_controls;
  for (int c = 0; c < 0x20; ++c) all_controls += static_cast<char>(c);
  contents.push_back(all_controls);
  // Every byte value at every place of the 8-byte fast path (and after it),
  // and UTF-8 sequences across its word boundaries.
  for (int b = 0; b < 256; ++b) {
    for (int at : {0, 1, 3, 6, 7, 8, 9, 15, 16}) {
      std::string t(17, 'a');
      t[static_cast<std::size_t>(at)] = static_cast<char>(b);
      contents.push_back(t);
    }
  }
  for (int pad = 0; pad < 9; ++pad) {
    contents.push_back(std::string(static_cast<std::size_t>(pad), 'x') +
                       "\xc3\xbc\xe2\x9c\x93"
                       "abcdefgh");
    contents.push_back(std::string(static_cast<std::size_t>(pad), 'x') +
                       "\xf0\x9d\x84\x9e\"q\\z\n");
  }
  std::uint64_t x = 0x9E3779B97F4A7C15ull;  // a fixed pseudo-random byte soup
  for (int k = 0; k < 200; ++k) {
    std::string r;
    for (int i = 0; i < 64; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      r += static_cast<char>(x & 0xFF);
    }
    contents.push_back(r);
  }
  config::ModelConfig m;
  m.model = "gpt-\"x\"";
  m.temperature = 0.1;
  m.top_p = 0.95;
  for (bool stream : {false, true}) {
    m.stream = stream;
    std::vector<Message> msgs;
    for (const auto& c : contents) {
      msgs.push_back({"user", c});
      EXPECT_EQ(build_request_body(m, {{"system", "s"}, {"user", c}}),
                reference_body(m, {{"system", "s"}, {"user", c}}));
    }
    msgs.push_back({"ro\xffle", "x"});
    EXPECT_EQ(build_request_body(m, msgs), reference_body(m, msgs));
    EXPECT_EQ(build_request_body(m, {}), reference_body(m, {}));
  }
  std::string out;
  EXPECT_FALSE(append_json_string(out, "\xc3"));
  out.clear();
  EXPECT_TRUE(append_json_string(out, "a\"\x01"));
  EXPECT_EQ(out, "\"a\\\"\\u0001\"");
}

TEST(ParseCompletion, ReadsContentReasoningFinishAndUsage) {
  auto p = parse_completion(R"({"choices":[{"index":0,"message":{"role":"assistant","content":"hi",
    "reasoning_content":"think"},"finish_reason":"length"}],
    "usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4},
    "completion_tokens_details":{"reasoning_tokens":2}}})");
  ASSERT_TRUE(p.ok) << p.error;
  testing_util::expect_reply(p, "hi", "think", "length", 10, 5, 4);
  EXPECT_EQ(p.usage.reasoning_tokens, 2);
}

TEST(ParseCompletion, ReasoningFieldAndNullContent) {
  auto p = parse_completion(
      R"({"choices":[{"message":{"content":null,"reasoning":"r"},"finish_reason":"stop"}]})");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_FALSE(p.has_usage);
}

TEST(ParseCompletion, RejectsUnusableBodies) {
  EXPECT_FALSE(parse_completion("{\"choices\": [").ok);
  EXPECT_FALSE(parse_completion("").ok);
  EXPECT_FALSE(parse_completion(R"({"choices":[]})").ok);
  EXPECT_FALSE(parse_completion(R"({"choices":[{"finish_reason":"stop"}]})").ok);
  auto e = parse_completion(R"({"error":{"message":"boom"}})");
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.error.find("boom"), std::string::npos);
}

// --- the simdjson fast path answers as the nlohmann path does ---------------

void expect_same(const ParsedCompletion& a, const ParsedCompletion& b, const std::string& body) {
  EXPECT_EQ(a.ok, b.ok) << body;
  EXPECT_EQ(a.error, b.error) << body;
  EXPECT_EQ(a.content, b.content) << body;
  EXPECT_EQ(a.reasoning, b.reasoning) << body;
  EXPECT_EQ(a.finish_reason, b.finish_reason) << body;
  EXPECT_EQ(a.has_usage, b.has_usage) << body;
  EXPECT_EQ(a.usage.prompt_tokens, b.usage.prompt_tokens) << body;
  EXPECT_EQ(a.usage.completion_tokens, b.usage.completion_tokens) << body;
  EXPECT_EQ(a.usage.cached_tokens, b.usage.cached_tokens) << body;
  EXPECT_EQ(a.usage.reasoning_tokens, b.usage.reasoning_tokens) << body;
}

// Compares the two paths on `body`; true when the fast path answered.
bool same_both_ways(const std::string& body) {
  auto fast = parse_completion_fast(body);
  const auto reference = parse_completion_reference(body);
  if (fast) {
    EXPECT_TRUE(fast->ok) << body;  // (it answers only for usable replies)
    expect_same(*fast, reference, body);
  }
  expect_same(parse_completion(body), reference, body);
  return fast.has_value();
}

TEST(ParseCompletionFast, AnswersTheOrdinaryReplyAsTheReferenceDoes) {
  const std::string reply =
      "Here is the kernel:\n```python\nimport torch\nx = \"a\\tb\"\n```\nACTION: CHECK";
  nlohmann::json j = {
      {"id", "r-1"},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", reply}, {"reasoning_content", "hm"}}},
         {"finish_reason", "stop"}}}},
      {"usage",
       {{"prompt_tokens", 1200},
        {"completion_tokens", 300},
        {"prompt_tokens_details", {{"cached_tokens", 1000}}},
        {"completion_tokens_details", {{"reasoning_tokens", 20}}}}}};
  EXPECT_TRUE(same_both_ways(j.dump()));
  auto p = parse_completion(j.dump());
  EXPECT_EQ(p.content, reply);
  EXPECT_EQ(p.usage.cached_tokens, 1000);
}

// The cases where the two parsers' rules differ: each must come out alike
// (the fast path declines them or agrees).
TEST(ParseCompletionFast, EdgeCasesComeOutAlike) {
  const std::string ok_choice = R"("choices":[{"message":{"content":"x"},"finish_reason":"stop"}])";
  const std::vector<std::string> bodies = {
      "{" + ok_choice + "}",
      "{" + ok_choice + R"(,"error":null})",
      "{" + ok_choice + R"(,"error":{"message":"boom"}})",
      R"({"choices":[{"message":{"content":"a","content":"b"}}]})",  // duplicate: last wins
      "{" + ok_choice + "," + ok_choice + "}",
      R"({"choices":[{"message":{"content":"x"},"finish_reason":"a","finish_reason":"b"}]})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens":1,"prompt_tokens":2}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens":-0,"completion_tokens":2.7}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens":18446744073709551615}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens":9223372036854775807}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens":"12","completion_tokens":null}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens_details":{"cached_tokens":3.0}}})",
      "{" + ok_choice + R"(,"usage":{"prompt_tokens_details":[1]}})",
      "{" + ok_choice + R"(,"usage":null})",
      "{" + ok_choice + R"(,"usage":7})",
      "{" + ok_choice + R"(,"x":1e400})",
      R"({"choices":[{"message":{"content":"\ud800"}}]})",  // lone surrogate
      R"({"choices":[{"message":{"content":"\ud83d\ude00 \u0000 \/"}}]})",
      "{\"choices\":[{\"message\":{\"content\":\"\xff\"}}]}",  // invalid UTF-8
      "{\"choices\":[{\"message\":{\"content\":\"\xc3\xa9\"}}]}",
      "{\"choices\":[{\"message\":{\"content\":\"a\nb\"}}]}",  // raw control character
      "\xef\xbb\xbf{" + ok_choice + "}",                       // byte order mark
      "{" + ok_choice + "} x",                                 // trailing text
      "{" + ok_choice + "}\n\t ",
      " {" + ok_choice + "}",
      "{" + ok_choice + "}" + std::string(1, '\0'),
      R"({"choices":[{"message":{"content":"x"}}],})",
      R"({"choices":[{"message":{"content":'x'}}]})",
      R"({"choices":[[]]})",
      R"({"choices":[{"message":[]}]})",
      R"({"choices":{"0":{"message":{}}}})",
      R"({"choices":[{"message":{"content":7,"reasoning":"r"}}]})",
      R"({"choices":[{"message":{"reasoning_content":"","reasoning":"r"}}]})",
      R"([{"choices":[]}])",
      "null",
      "",
      std::string(2000, '[') + std::string(2000, ']'),
      R"({"choices":[{"message":{"content":"x"}}],"deep":)" + std::string(1500, '[') +
          std::string(1500, ']') + "}",
  };
  int fast = 0;
  for (const auto& b : bodies) fast += same_both_ways(b);
  EXPECT_GT(fast, 5);  // (the fast path is not simply declining everything)
}

TEST(ParseCompletionFast, LeavesBodiesOverAMebibyteToTheReference) {
  const std::string big(std::size_t{1} << 20, 'x');
  const auto body = nlohmann::json({{"choices", {{{"message", {{"content", big}}}}}}}).dump();
  EXPECT_FALSE(parse_completion_fast(body).has_value());
  EXPECT_EQ(parse_completion(body).content, big);
  const auto small = nlohmann::json({{"choices", {{{"message", {{"content", "x"}}}}}}}).dump();
  EXPECT_TRUE(parse_completion_fast(small).has_value());
}

// Generated replies and byte-level mutations of them: whatever either parser
// makes of a body, parse_completion says what the reference says.
TEST(ParseCompletionFast, MutatedBodiesComeOutAlike) {
  std::mt19937_64 rng(20261201);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const std::vector<std::string> pieces = {"def f(x):\n",
                                           "\t",
                                           "\"q\"",
                                           "\\",
                                           "\xc3\xa9",
                                           "\xe2\x82\xac",
                                           "\xf0\x9f\x98\x80",
                                           std::string(1, '\0'),
                                           "\x01",
                                           "```python\n",
                                           "ACTION: SUBMIT",
                                           " ",
                                           "}{][,:"};
  auto text = [&] {
    std::string s;
    for (int i = pick(40); i-- > 0;) s += pieces[pick(static_cast<int>(pieces.size()))];
    return s;
  };
  auto value = [&]() -> nlohmann::json {
    switch (pick(6)) {
      case 0: return nullptr;
      case 1: return pick(1000);
      case 2: return -pick(5) * 1.5;
      case 3: return nlohmann::json::object({{"k", text()}});
      default: return text();
    }
  };
  int fast = 0, total = 0;
  for (int round = 0; round < 400; ++round) {
    nlohmann::json msg = {{"role", "assistant"},
                          {"content", pick(5) ? nlohmann::json(text()) : value()}};
    if (pick(3) == 0) msg["reasoning_content"] = value();
    if (pick(3) == 0) msg["reasoning"] = value();
    nlohmann::json choice = {{"message", msg}};
    if (pick(4)) choice["finish_reason"] = pick(4) ? nlohmann::json("stop") : value();
    nlohmann::json root = {{"choices", {choice}}};
    if (pick(2)) {
      nlohmann::json u = {{"prompt_tokens", pick(4) ? nlohmann::json(pick(100000)) : value()},
                          {"completion_tokens", pick(100)}};
      if (pick(2))
        u["prompt_tokens_details"] = {
            {"cached_tokens", pick(4) ? nlohmann::json(pick(9)) : value()}};
      if (pick(2))
        u["completion_tokens_details"] =
            pick(4) ? nlohmann::json({{"reasoning_tokens", 3}}) : value();
      root["usage"] = u;
    }
    if (pick(8) == 0) root["error"] = pick(2) ? value() : nlohmann::json(nullptr);
    std::string body =
        root.dump(pick(2) ? -1 : 1, ' ', pick(2) == 0, nlohmann::json::error_handler_t::replace);
    fast += same_both_ways(body);
    ++total;
    for (int m = 0; m < 8; ++m) {
      std::string b = body;
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(b.size())));
      switch (pick(4)) {
        case 0: b[at] = static_cast<char>(pick(256)); break;
        case 1: b.erase(at, 1 + static_cast<std::size_t>(pick(3))); break;
        case 2: b.insert(at, pieces[pick(static_cast<int>(pieces.size()))]); break;
        default: b.resize(at); break;
      }
      same_both_ways(b);
    }
  }
  EXPECT_GT(fast, total / 2);
}

TEST(SummarizeErrorBody, OneLineAndBounded) {
  EXPECT_EQ(summarize_error_body(R"({"error":{"message":"bad\nthing"}})"), "bad thing");
  EXPECT_EQ(summarize_error_body(R"({"message":"m"})"), "m");
  EXPECT_EQ(summarize_error_body(std::string(500, 'x'), 10), std::string(10, 'x') + "...");
  EXPECT_EQ(summarize_error_body(""), "");
}

TEST(SseParser, HandlesLineEndingsCommentsMultilineAndSplits) {
  std::vector<std::pair<std::string, std::string>> events;
  SseParser p([&](std::string_view e, std::string_view d) { events.emplace_back(e, d); });
  const std::string stream =
      ": comment\r\n\r\ndata: a\r\ndata: b\r\n\r\nevent: error\ndata:{\"x\":1}\n\ndata: c\r\rid: "
      "7\nretry: 5\n\n";
  // Feed byte by byte to exercise every split point.
  for (char c : stream) p.feed(std::string_view(&c, 1));
  p.finish();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].second, "a\nb");
  EXPECT_EQ(events[1].first, "error");
  EXPECT_EQ(events[1].second, "{\"x\":1}");
  EXPECT_EQ(events[2].second, "c");
  EXPECT_EQ(p.comments(), 1);
}

TEST(SseParser, FinishDispatchesUnterminatedEvent) {
  std::vector<std::string> data;
  SseParser p([&](std::string_view, std::string_view d) { data.emplace_back(d); });
  p.feed("data: [DONE]");
  p.finish();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0], "[DONE]");
}

std::string chunk(const std::string& delta, const char* finish = nullptr) {
  nlohmann::json c = {{"choices", {{{"index", 0}, {"delta", nlohmann::json::parse(delta)}}}}};
  c["choices"][0]["finish_reason"] = finish ? nlohmann::json(finish) : nlohmann::json(nullptr);
  return "data: " + c.dump() + "\n\n";
}

TEST(StreamAssembler, AssemblesContentReasoningAndUsage) {
  StreamAssembler s;
  s.feed(": keep-alive\n\n");
  s.feed(chunk(R"({"role":"assistant","content":""})"));
  s.feed(chunk(R"({"reasoning_content":"th"})"));
  s.feed(chunk(R"({"reasoning":"ink"})"));
  s.feed(chunk(R"({"content":"Hel"})"));
  const std::string c2 = chunk(R"({"content":"lo"})");
  s.feed(c2.substr(0, 7));
  s.feed(c2.substr(7));
  s.feed(chunk("{}", "stop"));
  s.feed(
      R"(data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}})"
      "\n\n");
  s.feed("data: [DONE]\n\n");
  auto r = s.finish();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.content, "Hello");
  EXPECT_EQ(r.reasoning, "think");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_TRUE(r.has_usage);
  EXPECT_EQ(r.usage.prompt_tokens, 3);
  EXPECT_EQ(r.usage.cached_tokens, 1);
}

TEST(StreamAssembler, FinishFrameWithoutDoneIsComplete) {
  StreamAssembler s;
  s.feed(chunk(R"({"content":"x"})"));
  s.feed(chunk("{}", "length"));
  auto r = s.finish();
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.finish_reason, "length");
}

TEST(StreamAssembler, TruncatedStreamFails) {
  StreamAssembler s;
  s.feed(chunk(R"({"content":"partial"})"));
  auto r = s.finish();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("without a finish frame"), std::string::npos);
}

TEST(StreamAssembler, EmptyStreamFails) {
  StreamAssembler s;
  s.feed(": only a comment\n\n");
  EXPECT_FALSE(s.finish().ok);
}

TEST(StreamAssembler, MidStreamErrorFails) {
  StreamAssembler s;
  s.feed(chunk(R"({"content":"a"})"));
  s.feed("data: {\"error\":{\"message\":\"overloaded\"}}\n\n");
  s.feed(chunk("{}", "stop"));
  s.feed("data: [DONE]\n\n");
  auto r = s.finish();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("overloaded"), std::string::npos);
}

TEST(StreamAssembler, ErrorEventTypeFails) {
  StreamAssembler s;
  s.feed("event: error\ndata: {\"message\":\"boom\"}\n\n");
  EXPECT_FALSE(s.finish().ok);
}

TEST(StreamAssembler, MalformedChunkFails) {
  StreamAssembler s;
  s.feed("data: {\"choices\": [\n\n");
  s.feed(chunk("{}", "stop"));
  EXPECT_FALSE(s.finish().ok);
}

}  // namespace
}  // namespace korch::llm
