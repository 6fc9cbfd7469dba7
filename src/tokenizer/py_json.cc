// tokenizer: order-preserving JSON parse and Python-compatible json.dumps (see py_json.h).
#include "tokenizer/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace dsv4::tok {
namespace {

constexpr int kMaxDepth = 128;

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<JsonValue> parse_document() {
    JsonValue v;
    DSV4_RETURN_IF_ERROR(parse_value(v, 0));
    skip_ws();
    if (pos_ != s_.size()) return error("json.trailing_data", "unexpected text after the JSON value");
    return v;
  }

 private:
  Status error(const char* rule, const std::string& what) const {
    return invalid_argument(rule, what + " at byte " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }

  Status parse_value(JsonValue& v, int depth) {
    if (depth > kMaxDepth) return error("json.too_deep", "JSON nested deeper than " + std::to_string(kMaxDepth));
    skip_ws();
    if (pos_ >= s_.size()) return error("json.unexpected_end", "unexpected end of JSON");
    const char c = s_[pos_];
    if (c == '{') return parse_object(v, depth);
    if (c == '[') return parse_array(v, depth);
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      return parse_string(v.string);
    }
    if (consume("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
      return Status::ok();
    }
    if (consume("false")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = false;
      return Status::ok();
    }
    if (consume("null")) {
      v.kind = JsonValue::Kind::kNull;
      return Status::ok();
    }
    if (consume("NaN")) {
      v.kind = JsonValue::Kind::kFloat;
      v.number = std::nan("");
      return Status::ok();
    }
    if (consume("Infinity")) {
      v.kind = JsonValue::Kind::kFloat;
      v.number = INFINITY;
      return Status::ok();
    }
    if (consume("-Infinity")) {
      v.kind = JsonValue::Kind::kFloat;
      v.number = -INFINITY;
      return Status::ok();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v);
    return error("json.unexpected_char", std::string("unexpected character '") + c + "'");
  }

  Status parse_number(JsonValue& v) {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d0 = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d0;
    };
    const size_t int_start = pos_;
    const size_t n_int = digits();
    if (n_int == 0) return error("json.bad_number", "a number needs digits");
    if (n_int > 1 && s_[int_start] == '0') return error("json.bad_number", "leading zeros are not JSON");
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      is_float = true;
      if (digits() == 0) return error("json.bad_number", "a fraction needs digits");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      is_float = true;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return error("json.bad_number", "an exponent needs digits");
    }
    const std::string text(s_.substr(start, pos_ - start));
    if (is_float) {
      v.kind = JsonValue::Kind::kFloat;
      v.number = std::strtod(text.c_str(), nullptr);  // overflow gives inf, as Python's float() does
    } else {
      v.kind = JsonValue::Kind::kInt;
      v.int_digits = (text == "-0") ? "0" : text;  // Python: int("-0") == 0
    }
    return Status::ok();
  }

  Status parse_hex4(uint32_t& out) {
    if (pos_ + 4 > s_.size()) return error("json.bad_escape", "truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9')
        out |= c - '0';
      else if (c >= 'a' && c <= 'f')
        out |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        out |= c - 'A' + 10;
      else
        return error("json.bad_escape", "bad hex digit in \\u escape");
    }
    return Status::ok();
  }

  Status parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return error("json.unterminated_string", "unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (c < 0x20) return error("json.control_char", "raw control character in a string");
      if (c != '\\') {
        // Copy a run of plain bytes at once.
        const size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' && static_cast<unsigned char>(s_[pos_]) >= 0x20)
          ++pos_;
        out.append(s_.substr(start, pos_ - start));
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return error("json.unterminated_string", "unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          DSV4_RETURN_IF_ERROR(parse_hex4(cp));
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            uint32_t lo = 0;
            DSV4_RETURN_IF_ERROR(parse_hex4(lo));
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;  // not a pair: the high surrogate stands alone
            }
          }
          append_utf8(cp, out);
          break;
        }
        default:
          return error("json.bad_escape", std::string("unknown escape \\") + e);
      }
    }
  }

  Status parse_array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kArray;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Status::ok();
    }
    while (true) {
      JsonValue item;
      DSV4_RETURN_IF_ERROR(parse_value(item, depth + 1));
      v.items.push_back(std::move(item));
      skip_ws();
      if (pos_ >= s_.size()) return error("json.unexpected_end", "unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return Status::ok();
      }
      return error("json.expected_comma", "expected ',' or ']' in an array");
    }
  }

  Status parse_object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kObject;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Status::ok();
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return error("json.expected_key", "expected a string key");
      std::string key;
      DSV4_RETURN_IF_ERROR(parse_string(key));
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return error("json.expected_colon", "expected ':' after a key");
      ++pos_;
      JsonValue item;
      DSV4_RETURN_IF_ERROR(parse_value(item, depth + 1));
      bool replaced = false;
      for (auto& [k, existing] : v.fields) {
        if (k == key) {
          existing = std::move(item);
          replaced = true;
          break;
        }
      }
      if (!replaced) v.fields.push_back(JsonField{std::move(key), std::move(item)});
      skip_ws();
      if (pos_ >= s_.size()) return error("json.unexpected_end", "unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return Status::ok();
      }
      return error("json.expected_comma", "expected ',' or '}' in an object");
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void dump(const JsonValue& v, std::string& out) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      out += "null";
      break;
    case JsonValue::Kind::kBool:
      out += v.boolean ? "true" : "false";
      break;
    case JsonValue::Kind::kInt:
      out += v.int_digits;
      break;
    case JsonValue::Kind::kFloat:
      out += py_float_repr(v.number);
      break;
    case JsonValue::Kind::kString:
      out.push_back('"');
      py_json_escape_append(v.string, out);
      out.push_back('"');
      break;
    case JsonValue::Kind::kArray:
      out.push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ", ";
        dump(v.items[i], out);
      }
      out.push_back(']');
      break;
    case JsonValue::Kind::kObject:
      out.push_back('{');
      for (size_t i = 0; i < v.fields.size(); ++i) {
        if (i) out += ", ";
        out.push_back('"');
        py_json_escape_append(v.fields[i].key, out);
        out += "\": ";
        dump(v.fields[i].value, out);
      }
      out.push_back('}');
      break;
  }
}

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

Result<JsonValue> parse_json(std::string_view text) {
  return Parser(text).parse_document();
}

std::string py_json_dumps(const JsonValue& v) {
  std::string out;
  dump(v, out);
  return out;
}

void py_json_escape_append(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
}

std::string py_json_quote(std::string_view s) {
  std::string out = "\"";
  py_json_escape_append(s, out);
  out.push_back('"');
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits.push_back(sci[k]);
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    // Fixed notation (Python repr: -4 <= exponent < 16).
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, decpt);
      out.push_back('.');
      out += digits.substr(decpt);
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  out.push_back('e');
  out.push_back(exp10 < 0 ? '-' : '+');
  const int a = exp10 < 0 ? -exp10 : exp10;
  if (a < 10) out.push_back('0');
  out += std::to_string(a);
  return out;
}

}  // namespace dsv4::tok
