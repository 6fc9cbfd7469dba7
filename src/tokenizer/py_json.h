// tokenizer: an order-preserving JSON value that re-serialises exactly like Python's
// json.dumps(v, ensure_ascii=False). The V4 prompt embeds tool schemas and arguments in that form
// (spec chat-format §2.3), so key order, integer digits and float repr must survive a round trip.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace dsv4::tok {

// One member of a JSON object. Declared before JsonValue and defined after it: std::vector may hold an
// incomplete type (C++17), but std::pair<std::string, JsonValue> may not be named while JsonValue is
// incomplete (libstdc++ with clang rejects it), hence a named struct rather than a pair.
struct JsonField;

struct JsonValue {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  // kInt: the literal digits (Python ints are unbounded, so they are never converted);
  // kFloat: the value as a double (Python re-prints it with float.__repr__).
  std::string int_digits;
  double number = 0.0;
  std::string string;             // kString: UTF-8 text (lone surrogates from \u escapes kept as WTF-8)
  std::vector<JsonValue> items;   // kArray
  std::vector<JsonField> fields;  // kObject, in first-insertion order

  bool is_object() const { return kind == Kind::kObject; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_array() const { return kind == Kind::kArray; }
  // The field's value, or nullptr. Linear: objects here are small.
  const JsonValue* find(std::string_view key) const;
};

struct JsonField {
  std::string key;
  JsonValue value;
};

// Parses RFC 8259 JSON plus what Python's json.loads also accepts (NaN, Infinity, -Infinity).
// Duplicate keys behave as in a Python dict: the value is the last one, the position the first.
// Depth is limited (`json.too_deep`) so hostile input cannot exhaust the stack.
Result<JsonValue> parse_json(std::string_view text);

// json.dumps(v, ensure_ascii=False): separators ", " and ": ", insertion order, non-ASCII raw.
std::string py_json_dumps(const JsonValue& v);
// json.dumps of a single string: the quoted, escaped form.
std::string py_json_quote(std::string_view s);
// The body of py_json_quote without the quotes (used to stream string arguments chunk by chunk).
void py_json_escape_append(std::string_view s, std::string& out);
// Python float.__repr__: shortest round-trip digits, exponent form below 1e-4 and from 1e16.
std::string py_float_repr(double v);

}  // namespace dsv4::tok
