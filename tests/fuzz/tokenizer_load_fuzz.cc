// fuzz: tokenizer.json loading (reliability §A3). Any bytes must give a Tokenizer or a kInvalidFile /
// kUnimplemented error with a `tokenizer.*` rule, never a crash; a file that loads must encode (with and
// without added-token matching) and decode without faults, and decode must give valid UTF-8.
#include <string_view>

#include "core/check.h"
#include "fuzz_targets.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsv4::fuzz {

int tokenizer_load_entry(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = Tokenizer::load_from_json(text, "fuzz/tokenizer.json");
  if (!t.is_ok()) {
    DSV4_CHECK(t.status().rule().rfind("tokenizer.", 0) == 0, t.status().to_string());
    return 0;
  }
  for (const bool special : {true, false}) {
    const auto ids = t->encode("Hello, 世界 <s> 123 a-b\n\n  x \xff", special);
    for (const int32_t id : ids) DSV4_CHECK(id >= 0 && id < t->vocab_size());
    DSV4_CHECK(tok::is_valid_utf8(t->decode(ids)));
  }
  return 0;
}

}  // namespace dsv4::fuzz
