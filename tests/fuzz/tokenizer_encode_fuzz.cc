// fuzz: encode / decode / stream-decode on arbitrary bytes, with a tokenizer derived from DeepSeek's
// (tests/fuzz/data/tokenizer_small.json: same regexes, ByteLevel and added tokens, the first 4000 merges;
// see make_small_tokenizer.py), loaded once per process. Checks: decode(encode(x)) == x with invalid
// UTF-8 repaired, with and without added-token matching and with matching limited to spans; without
// matching no added token appears; and for the same bytes read as ids, streaming decode emits only
// valid UTF-8 and equals decode.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "fuzz_targets.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsv4::fuzz {

const Tokenizer& small_tokenizer() {
  static const Tokenizer* t = [] {
    auto r = Tokenizer::load(DSV4_FUZZ_DATA_DIR "/tokenizer_small.json");
    DSV4_CHECK(r.is_ok(), r.status().to_string());
    return new Tokenizer(std::move(r).value());
  }();
  return *t;
}

int tokenizer_encode_entry(const uint8_t* data, size_t size) {
  const Tokenizer& t = small_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string repaired = tok::utf8_lossy(text);
  for (const bool special : {true, false}) {
    const auto ids = t.encode(text, special);
    DSV4_CHECK(t.decode(ids) == repaired);
    if (!special)
      for (const int32_t id : ids) DSV4_CHECK(!t.is_added_token(id));
  }
  // Added tokens allowed only inside two spans picked by the first bytes (offsets in the raw, possibly
  // invalid, text): the same text comes back.
  if (size >= 2) {
    const size_t a = data[0] % (size + 1), b = data[1] % (size + 1);
    const std::vector<TextSpan> spans{{0, std::min(a, b)}, {std::max(a, b), size}};
    DSV4_CHECK(t.decode(t.encode_with_special_spans(text, spans)) == repaired);
  }
  // The same bytes read as little-endian ids, any values (in range, gaps, out of range).
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 < size; i += 4) {
    const uint32_t v = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (static_cast<uint32_t>(data[i + 3]) << 24);
    ids.push_back(static_cast<int32_t>(v % 140000));
  }
  StreamDecoder sd(t);
  std::string streamed;
  for (const int32_t id : ids) {
    const std::string chunk = sd.push(id);
    DSV4_CHECK(tok::is_valid_utf8(chunk));
    streamed += chunk;
  }
  streamed += sd.flush();
  DSV4_CHECK(streamed == t.decode(ids));
  return 0;
}

}  // namespace dsv4::fuzz
