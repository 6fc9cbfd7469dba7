// fuzz: chat request JSON → V4 prompt. Any bytes must parse to a request or a typed error, and any
// request must render or fail with a Status, in both thinking modes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto req = dsv4::parse_chat_request_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!req.is_ok()) return 0;
  for (const auto mode : {dsv4::ThinkingMode::kThinking, dsv4::ThinkingMode::kChat}) {
    dsv4::ChatRenderOptions o;
    o.thinking = mode;
    o.json_response_format = !req->response_format_json.empty();
    o.response_format_json = req->response_format_json;
    auto prompt = dsv4::render_chat(req->messages, req->tools, o);
    if (prompt.is_ok() && !prompt->starts_with("<｜begin▁of▁sentence｜>")) __builtin_trap();
  }
  return 0;
}
