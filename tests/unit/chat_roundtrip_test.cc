// unit: rendering then parsing gives back the messages. Each assistant turn of the official
// encoder vectors is cut out of the reference prompt (from its generation prefix through EOS) and
// parsed; reasoning, content and tool calls must equal the input message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"
#include "tokenizer/output_parser.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

TEST(ChatRoundTrip, OfficialVectorsParseBackToTheirMessages) {
  const fs::path dir = test::shared_dir() / "spec" / "official" / "encoding-tests";
  int checked = 0;
  for (const char* n : {"1", "2"}) {
    auto req = parse_chat_request_json(test::read_text_file(dir / (std::string("test_input_") + n + ".json")));
    ASSERT_TRUE(req.is_ok());
    const std::string prompt = test::read_text_file(dir / (std::string("test_output_") + n + ".txt"));
    // Assistant turns appear in order; each starts after "<｜Assistant｜>" + <think> or </think>.
    size_t pos = 0;
    for (const ChatMessage& m : req->messages) {
      if (m.role != "assistant") continue;
      pos = prompt.find("<｜Assistant｜>", pos);
      ASSERT_NE(pos, std::string::npos);
      pos += std::string_view("<｜Assistant｜>").size();
      // With the reasoning kept, the prompt holds <think>reasoning</think>: parse in thinking mode
      // from after <think>. A dropped turn starts with </think> and is parsed in chat mode.
      const bool kept = prompt.compare(pos, 7, "<think>") == 0;
      pos += kept ? 7 : 8;
      const size_t end = prompt.find("<｜end▁of▁sentence｜>", pos) + std::string_view("<｜end▁of▁sentence｜>").size();
      const ParsedCompletion p = parse_completion(std::string_view(prompt).substr(pos, end - pos),
                                                  kept ? ThinkingMode::kThinking : ThinkingMode::kChat);
      EXPECT_EQ(p.content, m.content.value_or(""));
      if (kept) {
        EXPECT_EQ(p.reasoning_content, m.reasoning_content.value_or(""));
      }
      ASSERT_EQ(p.tool_calls.size(), m.tool_calls.size());
      for (size_t i = 0; i < m.tool_calls.size(); ++i) {
        EXPECT_EQ(p.tool_calls[i].name, m.tool_calls[i].name);
        EXPECT_EQ(nlohmann::json::parse(p.tool_calls[i].arguments), nlohmann::json::parse(m.tool_calls[i].arguments));
        EXPECT_TRUE(p.tool_calls[i].id.empty());
      }
      ++checked;
      pos = end;
    }
  }
  EXPECT_EQ(checked, 4);
}

TEST(ChatRoundTrip, RenderedToolCallsOfEveryValueTypeParseBack) {
  ChatMessage a{"assistant", "Let me check.", "Think \"hard\"\nnow.", {}, {}, {}};
  a.tool_calls = {
      {"1", "exec",
       R"({"cmd": "ls -la 2>&1 | grep \"x\" </dev/null", "n": -3.5e-07, "ok": false, "none": null, "list": [1, {"a": "b"}], "multi": "line1\nline2\t\u00e9"})"},
      {"2", "noop", "{}"}};
  const std::vector<ChatMessage> msgs{{"user", "hi", {}, {}, {}, {}}, a};
  const std::vector<ToolDefinition> tools{{"exec", "run", R"({"type": "object"})", ""}};
  auto prompt = render_chat(msgs, tools, ChatRenderOptions{});
  ASSERT_TRUE(prompt.is_ok());
  const size_t start = prompt->rfind("<｜Assistant｜><think>") + std::string_view("<｜Assistant｜><think>").size();
  const ParsedCompletion p = parse_completion(std::string_view(*prompt).substr(start), ThinkingMode::kThinking);
  EXPECT_EQ(p.reasoning_content, *a.reasoning_content);
  EXPECT_EQ(p.content, *a.content);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(p.tool_calls[0].arguments), nlohmann::json::parse(a.tool_calls[0].arguments));
  EXPECT_EQ(p.tool_calls[1].arguments, "{}");
}

}  // namespace
}  // namespace dsv4
