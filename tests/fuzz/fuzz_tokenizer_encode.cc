// fuzz: encode/decode/stream-decode on DeepSeek's tokenizer.json with arbitrary bytes. Checks the
// round trip decode(encode(x)) == x with invalid UTF-8 repaired, with and without special tokens,
// and that streaming decode emits valid UTF-8 and equals decode for arbitrary id sequences.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

#ifndef DSV4_SHARED_DIR
#define DSV4_SHARED_DIR "../shared"
#endif

static const dsv4::Tokenizer& tokenizer() {
  static const dsv4::Tokenizer* t = [] {
    const char* env = std::getenv("DSV4_SHARED_DIR");
    auto r = dsv4::Tokenizer::load(std::filesystem::path(env ? env : DSV4_SHARED_DIR) / "tokenizer" / "tokenizer.json");
    if (!r.is_ok()) std::abort();
    return new dsv4::Tokenizer(std::move(r).value());
  }();
  return *t;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& t = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string repaired = dsv4::tok::utf8_lossy(text);
  for (const bool special : {true, false}) {
    const auto ids = t.encode(text, special);
    if (t.decode(ids) != repaired) __builtin_trap();
  }
  // The same bytes read as little-endian ids (any values, in range or not).
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 < size; i += 4) {
    uint32_t v = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (static_cast<uint32_t>(data[i + 3]) << 24);
    ids.push_back(static_cast<int32_t>(v % 140000));
  }
  dsv4::StreamDecoder sd(t);
  std::string streamed;
  for (const int32_t id : ids) {
    const std::string chunk = sd.push(id);
    if (!dsv4::tok::is_valid_utf8(chunk)) __builtin_trap();
    streamed += chunk;
  }
  streamed += sd.flush();
  if (streamed != t.decode(ids)) __builtin_trap();
  return 0;
}
