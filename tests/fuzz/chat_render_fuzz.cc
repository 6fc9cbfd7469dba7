// fuzz: chat request JSON → V4 prompt. Any bytes must parse to a request or a typed error, and any
// request must render or fail with a Status, in both thinking modes; a rendered prompt starts with BOS.
#include <string_view>

#include "core/check.h"
#include "fuzz_targets.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"

namespace dsv4::fuzz {

int chat_render_entry(const uint8_t* data, size_t size) {
  auto req = parse_chat_request_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!req.is_ok()) {
    DSV4_CHECK(!req.status().rule().empty(), req.status().to_string());
    return 0;
  }
  for (const auto mode : {ThinkingMode::kThinking, ThinkingMode::kChat}) {
    ChatRenderOptions o;
    o.thinking = mode;
    o.json_response_format = !req->response_format_json.empty();
    o.response_format_json = req->response_format_json;
    auto prompt = render_chat(req->messages, req->tools, o);
    if (!prompt.is_ok()) {
      DSV4_CHECK(!prompt.status().rule().empty(), prompt.status().to_string());
      continue;
    }
    DSV4_CHECK(prompt->starts_with("<｜begin▁of▁sentence｜>"));
  }
  return 0;
}

}  // namespace dsv4::fuzz
