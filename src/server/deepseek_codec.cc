// server: request structs → tokenizer/chat.h structs, and the streaming output parser adapter.
#include "server/deepseek_codec.h"

#include "tokenizer/chat.h"
#include "tokenizer/output_parser.h"

namespace dsv4::server {
namespace {

class DeepSeekOutputParser final : public OutputParser {
 public:
  DeepSeekOutputParser(bool thinking, bool parse_tools)
      : parser_(thinking ? ThinkingMode::kThinking : ThinkingMode::kChat), thinking_(thinking), parse_tools_(parse_tools) {}

  OutputDelta push(std::string_view text) override { return convert(parser_.push(text)); }
  // The streaming parser cannot move reasoning already sent; an unterminated reasoning stays reasoning.
  OutputDelta finish(bool /*stopped*/) override { return convert(parser_.finish()); }
  bool in_reasoning() const override { return thinking_ && !parser_.reasoning_closed(); }

 private:
  OutputDelta convert(StreamingOutputParser::Delta d) const {
    OutputDelta out;
    out.content = std::move(d.content);
    out.reasoning_content = std::move(d.reasoning_content);
    // Without tools offered (or tool_choice none) DSML is parsed only to keep it out of the content.
    if (parse_tools_) {
      for (auto& tc : d.tool_calls) {
        ToolCallFragment f;
        f.index = tc.index;
        if (!tc.name.empty()) f.name = tc.name;
        f.arguments = std::move(tc.arguments);
        out.tool_calls.push_back(std::move(f));
      }
    }
    return out;
  }
  StreamingOutputParser parser_;
  bool thinking_;
  bool parse_tools_;
};

const char* tool_choice_string(const ToolChoice& c) {
  switch (c.kind) {
    case ToolChoiceKind::kNone: return "none";
    case ToolChoiceKind::kRequired: return "required";
    case ToolChoiceKind::kNamed: return nullptr;
    default: return "auto";
  }
}

}  // namespace

Result<std::unique_ptr<DeepSeekChatCodec>> DeepSeekChatCodec::load(const std::filesystem::path& tokenizer_json) {
  DSV4_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(tokenizer_json));
  return std::make_unique<DeepSeekChatCodec>(std::move(tok));
}

Result<std::vector<int32_t>> DeepSeekChatCodec::encode_chat(const ChatCompletionRequest& request) const {
  std::vector<ChatMessage> messages;
  messages.reserve(request.messages.size());
  for (const auto& m : request.messages) {
    ChatMessage cm;
    cm.role = m.role;
    cm.content = m.content;
    cm.reasoning_content = m.reasoning_content;
    for (const auto& tc : m.tool_calls) cm.tool_calls.push_back(ToolCall{tc.id, tc.name, tc.arguments});
    cm.tool_call_id = m.tool_call_id;
    cm.name = m.name;
    messages.push_back(std::move(cm));
  }
  std::vector<ToolDefinition> tools;
  for (const auto& t : request.tools) {
    ToolDefinition td;
    td.name = t.name;
    td.description = t.description;
    td.parameters_json = t.parameters_json;
    td.function_json = t.function_json;
    tools.push_back(std::move(td));
  }
  ChatRenderOptions opt;
  opt.thinking = request.thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
  opt.reasoning_effort = request.reasoning_effort;
  const char* choice = tool_choice_string(request.tool_choice);
  opt.tool_choice = choice ? choice : request.tool_choice.name;
  opt.json_response_format = request.json_response_format;
  // Only the template's own special tokens are special: a "<｜Assistant｜>" (or any other added-token
  // string) inside message content, reasoning, tool arguments or schemas is encoded as plain text.
  Result<std::vector<int32_t>> ids = dsv4::encode_chat(*tokenizer_, messages, tools, opt);
  if (!ids.is_ok()) {
    // Every render failure is a property of the request (roles, tool-message order, schemas).
    return invalid_argument(ids.status().rule(), ids.status().message());
  }
  return std::move(ids).value();
}

Result<std::vector<int32_t>> DeepSeekChatCodec::encode_text(std::string_view text) const {
  return tokenizer_->encode(text, /*allow_special=*/true);
}

std::string DeepSeekChatCodec::token_text(int32_t id) const { return std::string(tokenizer_->token_bytes(id)); }

std::unique_ptr<OutputParser> DeepSeekChatCodec::make_output_parser(bool thinking, bool parse_tools) const {
  return std::make_unique<DeepSeekOutputParser>(thinking, parse_tools);
}

}  // namespace dsv4::server
