// tokenizer: reads a chat request in the JSON shape of DeepSeek's encoder test vectors (a list of
// messages, or {"messages": [...], "tools": [...]}) into the plain structs of chat.h. Used by the
// render-chat CLI, the tests and the fuzzer; the HTTP server does its own OpenAI conversion.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat.h"

namespace dsv4 {

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
  std::string response_format_json;  // "" when absent
};

// Accepts OpenAI message fields: content as a string, null or an array of {"type":"text","text"}
// parts (joined with "\n\n"); reasoning_content (or "reasoning"); tool_calls with
// function.arguments as a JSON string or object; tool_call_id; name. Tools are
// [{"type":"function","function":{...}}] (or bare function objects), top-level or on a system message.
Result<ChatRequest> parse_chat_request_json(std::string_view json_text);

}  // namespace dsv4
