// server/testing: a tokenizer-free ChatCodec for server tests that must not depend on the tokenizer
// layer: one token per byte (id = byte + 3), a plain-text chat rendering, and an output parser that
// only splits reasoning at "</think>" (no DSML). Not for serving: it knows nothing about the model.
#pragma once

#include "server/chat_codec.h"

namespace dsv4::server::testing {

class SimpleCodec final : public ChatCodec {
 public:
  Result<std::vector<int32_t>> encode_chat(const ChatCompletionRequest& request) const override;
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override;
  std::string token_text(int32_t id) const override;
  std::unique_ptr<OutputParser> make_output_parser(bool thinking, bool parse_tools) const override;
};

}  // namespace dsv4::server::testing
