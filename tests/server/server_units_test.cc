// tests/server: the server's small pieces on their own — CSPRNG ids, the JSON depth pre-scan, Prometheus
// histograms, the error JSON shape, and the request parser's mapping of valid fields.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_depth.h"
#include "server/metrics.h"
#include "server/random_id.h"
#include "server/request_parser.h"

namespace dsv4::server {
namespace {

TEST(ServerUnits, RandomIdsAreWellFormedAndDistinct) {
  std::set<std::string> ids;
  std::array<int, 62> histogram{};
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (int i = 0; i < 20000; ++i) {
    const std::string id = random_id("call_", 24);
    ASSERT_EQ(id.size(), 29u);
    ASSERT_EQ(id.rfind("call_", 0), 0u);
    for (size_t k = 5; k < id.size(); ++k) {
      const size_t pos = alphabet.find(id[k]);
      ASSERT_NE(pos, std::string::npos) << id;
      ++histogram[pos];
    }
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 20000u);
  // 480000 symbols over 62 bins: each bin ≈ 7742 ± 87 (1 sigma); 10 sigma bounds cannot flake.
  for (int c : histogram) {
    EXPECT_GT(c, 7742 - 870);
    EXPECT_LT(c, 7742 + 870);
  }
}

TEST(ServerUnits, JsonDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})", 64), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[[[[[["})", 64), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[[[","b":[]})", 64), 2);
  EXPECT_EQ(json_nesting_depth("", 64), 0);
  EXPECT_GT(json_nesting_depth(std::string(100000, '['), 64), 64);  // stops early, no recursion
}

TEST(ServerUnits, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(5.0);
  std::string out;
  h.render("x", &out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 6.05\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
}

TEST(ServerUnits, ErrorJsonHasTheOpenAiShapeEvenForInvalidUtf8) {
  ApiError e = bad_request("invalid_value", "bad \xff byte", "messages[0]");
  auto j = nlohmann::json::parse(e.to_json());
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  EXPECT_EQ(j["error"]["param"], "messages[0]");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["message"].is_string());
  ApiError none = bad_request("x", "y");
  EXPECT_TRUE(nlohmann::json::parse(none.to_json())["error"]["param"].is_null());
  EXPECT_EQ(api_error_from_status(resource_exhausted("q", "full")).http_status, 503);
  EXPECT_EQ(api_error_from_status(resource_exhausted("q", "full")).retry_after_s, 1);
  EXPECT_EQ(api_error_from_status(out_of_range("c", "long")).http_status, 400);
}

TEST(ServerUnits, ChatRequestFieldsMapToTheStruct) {
  const char* body = R"({
    "model": "m",
    "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "reasoning": "thought",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"z": {}, "a": {}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "reasoning_effort": "max",
    "response_format": {"type": "json_object"},
    "stop": "END", "max_tokens": 5, "max_completion_tokens": 7, "seed": 3, "n": 2, "temperature": 0.7,
    "logprobs": true, "top_logprobs": 4, "stream": true, "stream_options": {"include_usage": true}
  })";
  ChatCompletionRequest r;
  auto err = parse_chat_request(body, RequestLimits{}, &r);
  ASSERT_FALSE(err) << err->to_json();
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");  // developer → system
  EXPECT_EQ(*r.messages[0].content, "A\n\nB");
  EXPECT_FALSE(r.messages[2].content.has_value());
  EXPECT_EQ(*r.messages[2].reasoning_content, "thought");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(*r.messages[3].tool_call_id, "call_1");
  ASSERT_EQ(r.tools.size(), 1u);
  // The schema keeps the client's key order (chat-format.md §2.3: json(function) as the client sent it).
  EXPECT_EQ(r.tools[0].parameters_json, R"({"type":"object","properties":{"z":{},"a":{}}})");
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kNamed);
  EXPECT_EQ(r.tool_choice.name, "f");
  EXPECT_TRUE(r.thinking);
  EXPECT_EQ(*r.reasoning_effort, "max");
  EXPECT_TRUE(r.json_response_format);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(*r.sampling.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(*r.sampling.seed, 3u);
  EXPECT_EQ(r.sampling.n, 2);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 4);
  EXPECT_TRUE(r.sampling.stream);
  EXPECT_TRUE(r.sampling.include_usage);
}

}  // namespace
}  // namespace dsv4::server
