// tokenizer: byte-level BPE loaded from a Hugging Face tokenizer.json (the DeepSeek V3/V4 family).
// encode() follows HF tokenizers: added tokens are split out first (leftmost-longest), the rest goes
// through the Split-regex pre-tokenizer (PCRE2, UTF + UCP, JIT), ByteLevel, then ranked BPE merges.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dsv4 {

namespace tok {
struct TokenizerModel;  // tokenizer.cc: vocab, merges, added tokens, compiled regexes, word cache
}

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0, end = 0;
};

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json. Malformed files give kInvalidFile with a `tokenizer.*` rule;
  // features outside the byte-level BPE family give kUnimplemented (never silently ignored).
  static Result<Tokenizer> load(const std::filesystem::path& tokenizer_json);
  // The same from the file's text (`origin` names it in errors). Used by load() and the fuzzer.
  static Result<Tokenizer> load_from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text → ids. Never adds BOS/EOS (the chat renderer writes BOS itself). Invalid UTF-8 is first
  // replaced by U+FFFD per maximal subpart, as Python's bytes.decode(errors="replace") and
  // Node's TextDecoder do, since HF tokenizers only ever see valid Unicode strings.
  // allow_special=false: no added-token string is matched at all (special or not), so user text
  // such as "<｜Assistant｜>" is encoded as ordinary BPE pieces and cannot forge a turn. NOTE: this is
  // stricter than HF's split_special_tokens, which still matches non-special added tokens, and
  // <｜User｜>/<｜Assistant｜> are non-special added tokens in DeepSeek's file.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // encode() with added tokens matched only where they lie entirely inside one of `special_spans`
  // (sorted, disjoint): text outside them is ordinary text, as with allow_special=false, but BPE and
  // the pre-tokenizer still run over the whole text between matches, so the ids equal
  // encode(text, true) whenever every added-token match of that call lies inside the spans.
  std::vector<int32_t> encode_with_special_spans(std::string_view text, std::span<const TextSpan> special_spans) const;

  // Ids → text as HF decode(skip_special_tokens=False): byte-level tokens become their bytes, added
  // tokens their content, and the result is made valid UTF-8 (U+FFFD for broken sequences). Ids with
  // no token (gaps or out of range) are skipped, as HF does.
  std::string decode(std::span<const int32_t> ids) const;

  // One more than the largest id (vocab and added tokens); the id space a logits row must cover.
  int64_t vocab_size() const;
  // HF token_to_id / id_to_token: the token's string as written in tokenizer.json (byte-level form
  // for BPE tokens, e.g. "Ġhello"; the literal content for added tokens).
  std::optional<int32_t> token_id(std::string_view token) const;
  std::string_view token_text(int32_t id) const;  // "" for an id with no token
  // The raw bytes a token decodes to (possibly an incomplete UTF-8 sequence). "" for no token.
  std::string_view token_bytes(int32_t id) const;
  // Whether the id is an added token (matched before BPE), and whether it is flagged special.
  bool is_added_token(int32_t id) const;
  bool is_special_token(int32_t id) const;

 private:
  explicit Tokenizer(std::unique_ptr<tok::TokenizerModel> m);
  std::unique_ptr<tok::TokenizerModel> m_;
};

}  // namespace dsv4
