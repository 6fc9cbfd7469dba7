// fuzz: tokenizer.json loading (reliability §A3). Any bytes must give a Tokenizer or a typed error,
// never a crash; a file that loads must encode and decode without faults.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = dsv4::Tokenizer::load_from_json(text, "fuzz.json");
  if (!t.is_ok()) {
    if (t.status().rule().rfind("tokenizer.", 0) != 0) __builtin_trap();  // every rejection names its rule
    return 0;
  }
  const auto ids = t->encode("Hello, 世界 <s> 123 \xff");
  (void)t->decode(ids);
  return 0;
}
