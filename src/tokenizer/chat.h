// tokenizer: OpenAI-style messages → the DeepSeek-V4 prompt string, byte-identical to DeepSeek's
// reference encoder (encoding_dsv4.py; spec chat-format §2), and to ids with only the template's own
// special tokens special (encode_chat). Plain structs, no JSON library types: the server converts
// request JSON into these; chat_json.h reads the official test-vector files.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace dsv4 {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's function.arguments
};

struct ChatMessage {
  std::string role;                    // system | user | assistant | tool | developer (OpenAI's; rendered as system)
  std::optional<std::string> content;  // content-part arrays already joined by the caller; null → ""
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> tool_call_id;  // role tool
  std::optional<std::string> name;
};

struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters_json;  // JSON text of the parameters schema; "" = no parameters key
  // Optional: the client's whole `function` object as JSON text. When set it is rendered instead of
  // {name, description, parameters}, so the schema line keeps the client's key order and any extra
  // keys (e.g. "strict"), exactly as the reference encoder prints json(tool["function"]).
  std::string function_json;
};

enum class ThinkingMode { kChat, kThinking };

struct ChatRenderOptions {
  ThinkingMode thinking = ThinkingMode::kThinking;
  // Thinking mode only. Original V4 release ladder: "max" → the P_MAX preamble; "high", "medium",
  // "low", "minimal", "xhigh" or absent → none; "none" → chat mode (spec §2.1). Others are rejected.
  std::optional<std::string> reasoning_effort{};  // {} here and below: designated initializers may omit it warning-free
  std::string tool_choice = "auto";  // auto | none | required | <function name>; "none" hides the tools
  bool json_response_format = false;
  // The response_format object as JSON text; when json_response_format is set without it,
  // {"type": "json_object"} is rendered.
  std::string response_format_json{};
  bool add_generation_prompt = true;  // false: a final user turn gets no "<｜Assistant｜>…" prefix
  // The final assistant message is a prefix to continue: render it without its EOS (encoder wo_eos).
  bool continue_final_message = false;
  // The encoder's drop_thinking (on by default): without tools, reasoning before the last user
  // turn is not rendered.
  bool drop_thinking = true;
};

// The exact prompt text (starting with BOS). Errors: unknown role, tool message outside a tool
// run, bad reasoning_effort, tool schema / response_format that is not JSON.
Result<std::string> render_chat(std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools,
                                const ChatRenderOptions& options);

// The same text, plus which bytes the template wrote itself: BOS, role and think tags, EOS, the
// <tool_result> wrappers, DSML tags and the fixed tools / response-format / effort text. Every other
// byte came from the request: message content, reasoning, tool-call names, argument keys and values,
// tool schemas and the response_format object.
struct RenderedPrompt {
  std::string text;
  std::vector<TextSpan> template_spans;  // sorted, disjoint, non-empty
};
Result<RenderedPrompt> render_chat_spans(std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools,
                                         const ChatRenderOptions& options);

// The prompt's ids for serving untrusted requests: the template's own special tokens are special,
// while a special-token string inside any request text (a user typing "<｜Assistant｜>") is encoded
// as ordinary text and cannot forge a turn. Equal to tokenizer.encode(render_chat(...)) whenever the
// request text holds no added-token string.
Result<std::vector<int32_t>> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                         std::span<const ToolDefinition> tools, const ChatRenderOptions& options);

namespace chat_tokens {
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";
}  // namespace chat_tokens

}  // namespace dsv4
