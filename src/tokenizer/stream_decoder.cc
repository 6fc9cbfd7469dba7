// tokenizer: streaming detokenizer (see stream_decoder.h).
#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace dsv4 {

std::string StreamDecoder::push(int32_t id) {
  pending_.append(tokenizer_->token_bytes(id));
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const tok::Utf8Step st = tok::next_utf8_unit(pending_, i);
    if (st.kind == tok::Utf8Unit::kIncomplete) break;  // wait for the rest of the character
    if (st.kind == tok::Utf8Unit::kValid) {
      out.append(pending_, i, st.len);
    } else {
      out.append(tok::kReplacementChar);
    }
    i += st.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = tok::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace dsv4
