// server: the ChatCodec of DeepSeek-V4 — the tokenizer layer's renderer (tokenizer/chat.h), BPE
// tokenizer and streaming DSML/reasoning parser (tokenizer/output_parser.h) behind the server's seam.
#pragma once

#include <filesystem>
#include <memory>

#include "server/chat_codec.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::server {

class DeepSeekChatCodec final : public ChatCodec {
 public:
  static Result<std::unique_ptr<DeepSeekChatCodec>> load(const std::filesystem::path& tokenizer_json);
  explicit DeepSeekChatCodec(Tokenizer tokenizer)
      : tokenizer_(std::make_shared<const Tokenizer>(std::move(tokenizer))) {}
  // Shares the tokenizer with the engine's detokenizer (runtime/tokenizer_detokenizer.h).
  explicit DeepSeekChatCodec(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}

  Result<std::vector<int32_t>> encode_chat(const ChatCompletionRequest& request) const override;
  // /v1/completions prompts are the client's raw prompt: special-token strings are matched, as HF does.
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override;
  std::string token_text(int32_t id) const override;
  std::unique_ptr<OutputParser> make_output_parser(bool thinking, bool parse_tools) const override;
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::shared_ptr<const Tokenizer>& shared_tokenizer() const { return tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace dsv4::server
