// tokenizer: UTF-8 maximal-subpart scanning (see utf8.h).
#include "tokenizer/utf8.h"

namespace dsv4::tok {

Utf8Step next_utf8_unit(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, Utf8Unit::kValid};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, Utf8Unit::kInvalid};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {k, Utf8Unit::kIncomplete};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
    if (b < l || b > h) return {k, Utf8Unit::kInvalid};
  }
  return {need + 1, Utf8Unit::kValid};
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w = 0;
      for (int k = 0; k < 8; ++k) w |= static_cast<uint64_t>(static_cast<unsigned char>(s[i + k])) << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const Utf8Step st = next_utf8_unit(s, i);
    if (st.kind != Utf8Unit::kValid) return false;
    i += st.len;
  }
  return true;
}

void append_utf8_lossy(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Step st = next_utf8_unit(s, i);
    if (st.kind == Utf8Unit::kValid) {
      out.append(s.data() + i, st.len);
    } else {
      out.append(kReplacementChar);
    }
    i += st.len;
  }
}

}  // namespace dsv4::tok
