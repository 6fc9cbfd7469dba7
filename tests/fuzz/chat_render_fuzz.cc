// fuzz: chat request JSON → V4 prompt. Any bytes must parse to a request or a typed error, and any
// request must render or fail with a Status, in both thinking modes; a rendered prompt starts with BOS,
// and encode_chat gives it back on decode with no more added tokens than a plain encode.
#include <algorithm>
#include <string_view>

#include "core/check.h"
#include "fuzz_targets.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

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
    // The server's path: the same text back, and no more added tokens than the plain encode finds.
    const Tokenizer& t = small_tokenizer();
    auto ids = encode_chat(t, req->messages, req->tools, o);
    DSV4_CHECK(ids.is_ok(), ids.status().to_string());
    DSV4_CHECK(t.decode(*ids) == tok::utf8_lossy(*prompt));
    auto n_added = [&](const std::vector<int32_t>& v) {
      return std::count_if(v.begin(), v.end(), [&](int32_t id) { return t.is_added_token(id); });
    };
    DSV4_CHECK(n_added(*ids) <= n_added(t.encode(*prompt)));
  }
  return 0;
}

}  // namespace dsv4::fuzz
