// unit: the V4 prompt renderer against DeepSeek's encoder test vectors (byte-identical) and the
// worked examples of spec chat-format §2.4, which are that encoder's output.
#include <gtest/gtest.h>

#include <regex>

#include "test_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

// Every official vector present (test_input_N.json with test_output_N.txt); more may be dropped in.
TEST(ChatRender, OfficialEncoderVectorsAreByteIdentical) {
  const fs::path dir = test::shared_dir() / "spec" / "official" / "encoding-tests";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, std::regex(R"(test_input_(\w+)\.json)"))) continue;
    const fs::path expected_path = dir / ("test_output_" + m[1].str() + ".txt");
    if (!fs::exists(expected_path)) continue;
    auto req = parse_chat_request_json(test::read_text_file(entry.path()));
    ASSERT_TRUE(req.is_ok()) << name << ": " << req.status().to_string();
    ChatRenderOptions opts;  // the reference tests run in thinking mode with defaults
    opts.json_response_format = !req->response_format_json.empty();
    opts.response_format_json = req->response_format_json;
    auto got = render_chat(req->messages, req->tools, opts);
    ASSERT_TRUE(got.is_ok()) << name << ": " << got.status().to_string();
    const std::string want = test::read_text_file(expected_path);
    if (*got != want) {
      size_t i = 0;
      while (i < got->size() && i < want.size() && (*got)[i] == want[i]) ++i;
      ADD_FAILURE() << name << ": first difference at byte " << i
                    << "\n  ours: " << got->substr(i > 30 ? i - 30 : 0, 90)
                    << "\n  want: " << want.substr(i > 30 ? i - 30 : 0, 90);
    }
    ++n;
  }
  EXPECT_GE(n, 2);
}

std::vector<ChatMessage> example_ab() {
  return {{"system", "You are helpful.", {}, {}, {}, {}},
          {"user", "Hi", {}, {}, {}, {}},
          {"assistant", "Hello!", "greet", {}, {}, {}},
          {"user", "2+2?", {}, {}, {}, {}}};
}

TEST(ChatRender, SpecExampleA_ChatMode) {
  ChatRenderOptions o;
  o.thinking = ThinkingMode::kChat;
  auto got = render_chat(example_ab(), {}, o);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(
      *got,
      "<｜begin▁of▁sentence｜>You are "
      "helpful.<｜User｜>Hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜></think>");
}

TEST(ChatRender, SpecExampleB_ThinkingDropsOldReasoning) {
  auto got = render_chat(example_ab(), {}, ChatRenderOptions{});
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(
      *got,
      "<｜begin▁of▁sentence｜>You are "
      "helpful.<｜User｜>Hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜><think>");
  // reasoning_effort "none" means chat mode (spec §2.1).
  ChatRenderOptions o;
  o.reasoning_effort = "none";
  EXPECT_EQ(*render_chat(example_ab(), {}, o),
            *render_chat(example_ab(), {}, ChatRenderOptions{.thinking = ThinkingMode::kChat}));
}

// The fixed tools preamble, taken from DeepSeek's own encoder output (official vector 1) rather than
// restated here: from "## Tools" up to and including the "### Available Tool Schemas" heading.
std::string official_tools_block_head() {
  const std::string out =
      test::read_text_file(test::shared_dir() / "spec" / "official" / "encoding-tests" / "test_output_1.txt");
  const std::string end_marker = "### Available Tool Schemas\n\n";
  const size_t b = out.find("## Tools\n\n"), e = out.find(end_marker);
  if (b == std::string::npos || e == std::string::npos || e < b) {
    ADD_FAILURE() << "official vector 1 has no tools block";
    return "";
  }
  return out.substr(b, e + end_marker.size() - b);
}

std::vector<ChatMessage> example_c() {
  std::vector<ChatMessage> m;
  m.push_back({"user", "Weather in Paris and Rome for 2 days?", {}, {}, {}, {}});
  ChatMessage a{"assistant", "Checking.", "Need two calls.", {}, {}, {}};
  a.tool_calls = {{"c1", "get_weather", R"({"city": "Paris", "days": 2})"},
                  {"c2", "get_weather", R"({"city":"Rome","days":2,"opts":{"unit":"C","x":[1,2.5,true,null]}})"}};
  m.push_back(a);
  m.push_back({"tool", "Rome: 20C", {}, {}, "c2", {}});  // out of order on purpose
  m.push_back({"tool", "Paris: 15C", {}, {}, "c1", {}});
  m.push_back({"assistant", "Paris 15C, Rome 20C.", "Summarize.", {}, {}, {}});
  m.push_back({"user", "Thanks", {}, {}, {}, {}});
  return m;
}

TEST(ChatRender, SpecExampleC_ToolsMergeSortAndKeepReasoning) {
  const std::vector<ToolDefinition> tools{{"get_weather", "Get weather", R"({"type":"object"})", ""}};
  auto got = render_chat(example_c(), tools, ChatRenderOptions{});
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  const std::string want =
      std::string("<｜begin▁of▁sentence｜>\n\n") + official_tools_block_head() +
      "{\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": \"object\"}}\n\n"
      "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"
      "<｜User｜>Weather in Paris and Rome for 2 days?<｜Assistant｜><think>Need two calls.</think>Checking.\n\n"
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
      "string=\"true\">Rome</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"unit\": \"C\", \"x\": [1, 2.5, true, "
      "null]}</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>Paris: 15C</tool_result>\n\n"
      "<tool_result>Rome: 20C</tool_result><｜Assistant｜><think>Summarize.</think>Paris 15C, Rome "
      "20C.<｜end▁of▁sentence｜>"
      "<｜User｜>Thanks<｜Assistant｜><think>";
  EXPECT_EQ(*got, want);

  // Chat mode: every <think>…</think> becomes a bare </think> (spec §2.4 C note).
  auto chat = render_chat(example_c(), tools, ChatRenderOptions{.thinking = ThinkingMode::kChat});
  ASSERT_TRUE(chat.is_ok());
  std::string want_chat = want;
  for (const std::string r : {"<think>Need two calls.</think>", "<think>Summarize.</think>"})
    want_chat.replace(want_chat.find(r), r.size(), "</think>");
  want_chat.replace(want_chat.rfind("<think>"), 7, "</think>");
  EXPECT_EQ(*chat, want_chat);

  // tool_choice "none": the tools are not rendered at all.
  auto none = render_chat(example_c(), tools, ChatRenderOptions{.tool_choice = "none"});
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->find("## Tools"), std::string::npos);
  EXPECT_TRUE(none->starts_with("<｜begin▁of▁sentence｜><｜User｜>"));
}

TEST(ChatRender, SpecExampleD_EffortMax) {
  ChatRenderOptions o;
  o.reasoning_effort = "max";
  const std::vector<ChatMessage> m{{"user", "solve it", {}, {}, {}, {}}};
  auto got = render_chat(m, {}, o);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(
      *got,
      "<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very "
      "thorough in "
      "your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing "
      "your "
      "logic against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire "
      "deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to "
      "ensure absolutely no assumption is left unchecked.\n\n<｜User｜>solve it<｜Assistant｜><think>");
  o.reasoning_effort = "high";
  EXPECT_EQ(*render_chat(m, {}, o), "<｜begin▁of▁sentence｜><｜User｜>solve it<｜Assistant｜><think>");
  o.reasoning_effort = "extreme";
  auto bad = render_chat(m, {}, o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().rule(), "chat.bad_reasoning_effort");
}

TEST(ChatRender, MessageRules) {
  // Consecutive user messages merge with \n\n; developer renders as system; no generation prompt.
  const std::vector<ChatMessage> m{
      {"developer", "Be brief.", {}, {}, {}, {}}, {"user", "A", {}, {}, {}, {}}, {"user", "B", {}, {}, {}, {}}};
  ChatRenderOptions o{.thinking = ThinkingMode::kChat, .add_generation_prompt = false};
  EXPECT_EQ(*render_chat(m, {}, o), "<｜begin▁of▁sentence｜>Be brief.<｜User｜>A\n\nB");
  // A final assistant prefix to continue: no EOS.
  const std::vector<ChatMessage> c{{"user", "Q", {}, {}, {}, {}}, {"assistant", "The answer is", {}, {}, {}, {}}};
  EXPECT_EQ(*render_chat(c, {}, ChatRenderOptions{.thinking = ThinkingMode::kChat, .continue_final_message = true}),
            "<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜></think>The answer is");
  // Arguments that are not a JSON object become one raw "arguments" parameter; {} gives an empty line.
  ChatMessage a{"assistant", "", {}, {}, {}, {}};
  a.tool_calls = {{"x", "now", "{}"}, {"y", "run", "not json"}};
  const std::vector<ChatMessage> t{{"user", "go", {}, {}, {}, {}}, a};
  auto got = render_chat(t, {}, ChatRenderOptions{.thinking = ThinkingMode::kChat});
  ASSERT_TRUE(got.is_ok());
  EXPECT_NE(got->find("<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>"), std::string::npos);
  EXPECT_NE(got->find("<｜DSML｜parameter name=\"arguments\" string=\"true\">not json</｜DSML｜parameter>"),
            std::string::npos);
  // Response format rides on the system message.
  ChatRenderOptions rf{
      .thinking = ThinkingMode::kChat,
      .json_response_format = true,
      .response_format_json = R"({"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}})"};
  EXPECT_EQ(
      *render_chat(std::vector<ChatMessage>{{"user", "Q", {}, {}, {}, {}}}, {}, rf),
      "<｜begin▁of▁sentence｜>\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
      "\"object\"}}}<｜User｜>Q<｜Assistant｜></think>");
  auto bad = render_chat(std::vector<ChatMessage>{{"robot", "x", {}, {}, {}, {}}}, {}, ChatRenderOptions{});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().rule(), "chat.unknown_role");
}

}  // namespace
}  // namespace dsv4
