// io: strict JSON parsing for untrusted files (safetensors headers, index.json, config.json). Nesting is
// bounded before the parser runs, so a hostile document is never recursed into, and duplicate object
// keys are reported instead of silently keeping the last one (what nlohmann does by default).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dsv4 {

// Maximum bracket nesting of JSON text, counted outside string literals (unbalanced text is fine: the
// parser rejects it afterwards).
int json_nesting_depth(std::string_view text);

struct StrictJson {
  enum class Error { kNone, kTooDeep, kSyntax, kDuplicateKey };
  Error error = Error::kNone;
  nlohmann::json value;       // valid only when error == kNone
  int duplicate_depth = 0;    // kDuplicateKey: 1 = a key of the top-level object, 2 = one level below...
  std::string duplicate_key;  // kDuplicateKey: the first key seen twice
};

// Parses `text` as exactly one JSON value (trailing whitespace only), nesting at most `max_depth`.
StrictJson parse_strict_json(std::string_view text, int max_depth);

}  // namespace dsv4
