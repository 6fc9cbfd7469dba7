// tokenizer: UTF-8 validation and repair shared by encode (input repair), decode (lossy output, as
// HF's String::from_utf8_lossy) and the streaming decoder (hold back incomplete sequences).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4::tok {

enum class Utf8Unit : uint8_t { kValid, kInvalid, kIncomplete };

struct Utf8Step {
  size_t len;     // bytes consumed: one character, or one maximal invalid subpart
  Utf8Unit kind;  // kIncomplete: a valid prefix of a character cut by the end of `s`
};

// The next unit of `s` starting at byte `i` (< s.size()), by the Unicode "maximal subpart" rule
// (Unicode §3.9, WHATWG decode, Python errors="replace", Rust from_utf8_lossy all agree on it).
Utf8Step next_utf8_unit(std::string_view s, size_t i);

bool is_valid_utf8(std::string_view s);

// Appends `s` with each invalid or truncated subpart replaced by U+FFFD.
void append_utf8_lossy(std::string_view s, std::string& out);
inline std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_utf8_lossy(s, out);
  return out;
}

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace dsv4::tok
