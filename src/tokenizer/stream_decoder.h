// tokenizer: incremental detokenization for streaming. Emits only complete UTF-8: a character that
// byte-level BPE split across tokens is held until its last byte arrives, so no chunk ever ends
// mid-character. Concatenating every push() and the final flush() equals Tokenizer::decode(all ids).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace dsv4 {

class StreamDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // The text completed by this token (possibly empty). Bytes that can never become a valid
  // character are emitted as U+FFFD at once, as decode() would.
  std::string push(int32_t id);
  // End of stream: whatever is still held, an incomplete character becoming U+FFFD.
  std::string flush();
  // Bytes currently held back (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace dsv4
