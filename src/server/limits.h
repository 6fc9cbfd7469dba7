// server: the hard limits every request is checked against (reliability.md §B2). Each violation is a
// 400 naming the limit; none of them is silently clamped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4::server {

struct RequestLimits {
  size_t max_body_bytes = 8u << 20;     // 8 MiB: long contexts are text, not media
  int max_json_depth = 64;              // nesting of arrays/objects in the body
  int32_t max_n = 8;                    // choices per request
  int32_t max_stop_strings = 16;
  size_t max_stop_string_bytes = 256;
  int32_t max_top_logprobs = 20;        // the OpenAI maximum
  size_t max_messages = 4096;
  size_t max_tools = 256;
  int64_t vocab_size = 0;               // > 0: token-id prompts are checked against it
};

}  // namespace dsv4::server
