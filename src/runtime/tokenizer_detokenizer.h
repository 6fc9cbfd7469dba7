// runtime: the Detokenizer over the tokenizer library (tokenizer/stream_decoder.h), so stop strings and
// TokenEvent text use the model's real byte-level BPE decoding.
#pragma once

#include <memory>

#include "runtime/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dsv4 {

class TokenizerDetokenizer : public Detokenizer {
 public:
  explicit TokenizerDetokenizer(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::unique_ptr<DetokenizerStream> new_stream() const override;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace dsv4
