// runtime: incremental detokenization as the runtime needs it (text for stop strings and for the
// TokenEvent stream). The tokenizer library's StreamDecoder is adapted to this in
// runtime/tokenizer_detokenizer.h; tests use a fake table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dsv4 {

class DetokenizerStream {
 public:
  virtual ~DetokenizerStream() = default;
  // Complete UTF-8 released by this token (empty while a character is split across tokens).
  virtual std::string push(int32_t token) = 0;
  // End of the stream: whatever is still held (an incomplete character, as the decoder renders it).
  virtual std::string flush() { return {}; }
};

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::unique_ptr<DetokenizerStream> new_stream() const = 0;
};

}  // namespace dsv4
