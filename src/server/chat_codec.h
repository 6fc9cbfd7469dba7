// server: the seam between the HTTP layer and the tokenizer/chat layer. The server needs three things
// from it: a request's messages rendered and encoded into prompt ids, plain text encoded, and the
// model's output text split incrementally into content / reasoning / tool-call deltas.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/api_types.h"

namespace dsv4::server {

// One fragment of a tool call. The first fragment of call `index` carries its name; `arguments`
// fragments concatenate to the call's arguments JSON. The server assigns the call id.
struct ToolCallFragment {
  int index = 0;
  std::optional<std::string> name;
  std::string arguments;
};

struct OutputDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCallFragment> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

// Incremental parser of one completion's text (thinking / DSML), fed the detokenized text chunk by chunk.
class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual OutputDelta push(std::string_view text) = 0;
  // End of generation: flushes held-back text. `stopped`: the model ended normally (finish "stop"),
  // which moves an unterminated reasoning into content (chat-format.md §3.2).
  virtual OutputDelta finish(bool stopped) = 0;
  // True while the parser is inside the reasoning part (used to count reasoning tokens).
  virtual bool in_reasoning() const = 0;
};

class ChatCodec {
 public:
  virtual ~ChatCodec() = default;
  // The chat prompt (messages, tools, thinking, response format) as token ids.
  virtual Result<std::vector<int32_t>> encode_chat(const ChatCompletionRequest& request) const = 0;
  // A /v1/completions prompt: plain text, special-token strings not matched (they are user text).
  virtual Result<std::vector<int32_t>> encode_text(std::string_view text) const = 0;
  // The text of one token (for logprobs); raw bytes may be an incomplete UTF-8 sequence.
  virtual std::string token_text(int32_t id) const = 0;
  // `thinking`: the prompt ended with <think>, so output starts as reasoning. `parse_tools`: DSML in the
  // output becomes tool calls (when tools were offered); otherwise DSML is stripped, never leaked.
  virtual std::unique_ptr<OutputParser> make_output_parser(bool thinking, bool parse_tools) const = 0;
};

}  // namespace dsv4::server
