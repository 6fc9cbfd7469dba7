// runtime: Detokenizer over tokenizer/StreamDecoder (see tokenizer_detokenizer.h).
#include "runtime/tokenizer_detokenizer.h"

#include "tokenizer/stream_decoder.h"

namespace dsv4 {
namespace {

class Stream : public DetokenizerStream {
 public:
  // The stream keeps the tokenizer alive: a request may outlive whoever built the engine.
  explicit Stream(std::shared_ptr<const Tokenizer> t) : tokenizer_(std::move(t)), decoder_(*tokenizer_) {}
  std::string push(int32_t token) override { return decoder_.push(token); }
  std::string flush() override { return decoder_.flush(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  StreamDecoder decoder_;
};

}  // namespace

std::unique_ptr<DetokenizerStream> TokenizerDetokenizer::new_stream() const { return std::make_unique<Stream>(tokenizer_); }

}  // namespace dsv4
