// runtime (test support): a detokenizer over a fixed table (token id -> text piece), with pieces that
// split multi-byte UTF-8 characters across tokens like byte-level BPE does.
#pragma once

#include <string>
#include <vector>

#include "runtime/detokenizer.h"

namespace dsv4::testing {

class FakeDetokenizer : public Detokenizer {
 public:
  explicit FakeDetokenizer(int32_t vocab_size);
  std::unique_ptr<DetokenizerStream> new_stream() const override;
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  // The whole text of a token sequence (for test oracles).
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  std::vector<std::string> pieces_;
};

}  // namespace dsv4::testing
