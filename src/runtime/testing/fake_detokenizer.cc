// runtime (test support): table detokenizer (see fake_detokenizer.h).
#include "runtime/testing/fake_detokenizer.h"

namespace dsv4::testing {
namespace {

// Releases only complete UTF-8 characters, holding a split one until its last byte arrives.
class TableStream : public DetokenizerStream {
 public:
  explicit TableStream(const FakeDetokenizer* d) : d_(d) {}
  std::string push(int32_t token) override {
    buf_ += d_->piece(token);
    size_t complete = 0, i = 0;
    while (i < buf_.size()) {
      const auto c = static_cast<unsigned char>(buf_[i]);
      const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      if (i + len > buf_.size()) break;
      i += len;
      complete = i;
    }
    std::string out = buf_.substr(0, complete);
    buf_.erase(0, complete);
    return out;
  }
  // The raw held bytes, so a test oracle can compare with the plain concatenation of pieces.
  std::string flush() override {
    std::string out;
    out.swap(buf_);
    return out;
  }

 private:
  const FakeDetokenizer* d_;
  std::string buf_;
};

}  // namespace

FakeDetokenizer::FakeDetokenizer(int32_t vocab_size) {
  static const char* kPieces[] = {"<s>", "</s>", " the", " cat", "s", "a", "b", "c", " ", "\n", "ab", "bc",
                                  "STOP", "ST", "OP", "\xC3", "\xA9", "\xE2\x82", "\xAC", "x"};
  constexpr size_t kN = sizeof(kPieces) / sizeof(kPieces[0]);
  for (int32_t i = 0; i < vocab_size; ++i) {
    pieces_.push_back(static_cast<size_t>(i) < kN ? std::string(kPieces[i]) : "t" + std::to_string(i));
  }
}

std::unique_ptr<DetokenizerStream> FakeDetokenizer::new_stream() const { return std::make_unique<TableStream>(this); }

std::string FakeDetokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) s += piece(id);
  return s;
}

}  // namespace dsv4::testing
