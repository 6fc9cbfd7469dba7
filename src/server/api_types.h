// server: the OpenAI request bodies as plain structs. JSON never leaves the server layer: the parser
// (request_parser.h) turns a validated body into these, and everything downstream works on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsv4::server {

struct ApiToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON text, as the client sent it
};

struct ApiMessage {
  std::string role;  // system | user | assistant | tool ("developer" is mapped to system)
  std::optional<std::string> content;            // content-part arrays are joined into one string
  std::optional<std::string> reasoning_content;  // accepted back on assistant turns ("reasoning" too)
  std::vector<ApiToolCall> tool_calls;
  std::optional<std::string> tool_call_id;
  std::optional<std::string> name;
};

struct ApiTool {
  std::string name;
  std::string description;
  std::string parameters_json;  // the JSON schema, serialized in the client's key order
  std::string function_json;    // the client's whole `function` object (rendered as sent; chat-format §2.3)
};

enum class ToolChoiceKind { kAuto, kNone, kRequired, kNamed };

struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::kAuto;
  std::string name;  // kNamed only
};

// Sampling and stopping fields shared by /v1/chat/completions and /v1/completions.
struct ApiSampling {
  std::optional<int64_t> max_tokens;  // absent: up to the context limit
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  int32_t n = 1;
  std::vector<std::string> stop;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct ChatCompletionRequest {
  std::string model;
  std::vector<ApiMessage> messages;
  std::vector<ApiTool> tools;
  ToolChoice tool_choice;
  bool thinking = true;  // DeepSeek API and vLLM both default to thinking on (chat-format.md §2.1)
  std::optional<std::string> reasoning_effort;  // "high" | "max" | ... (validated); "none" turns thinking off
  bool json_response_format = false;
  ApiSampling sampling;
};

struct CompletionRequest {
  std::string model;
  std::optional<std::string> prompt_text;    // exactly one of these two is set
  std::optional<std::vector<int32_t>> prompt_ids;
  ApiSampling sampling;
};

}  // namespace dsv4::server
