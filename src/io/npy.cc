// io: .npy reader/writer.
#include "io/npy.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/checked_math.h"
#include "io/mapped_file.h"

namespace dsv4 {
namespace {

constexpr uint32_t kMaxNpyHeaderBytes = 1u << 20;
constexpr size_t kMaxNpyRank = 32;  // numpy's own limit

size_t descr_size(const std::string& d) {
  if (d.size() < 3) return 0;
  return static_cast<size_t>(std::atoi(d.c_str() + 2));
}

bool is_supported_descr(std::string_view d) {
  for (std::string_view ok : {"<f4", "<f8", "<i4", "<i8", "|u1", "|i1", "|b1", "<u1", "<i1", "<b1"})
    if (d == ok) return true;
  return false;
}

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
// A small strict parser: quoted keys, and values that are a quoted string, True/False or a tuple of
// non-negative integers. Anything else is an error.
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view h) : h_(h) {}

  // Fills descr / fortran / shape; returns an error message, empty when fine.
  std::string parse(std::string& descr, bool& fortran, std::vector<uint64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    if (!eat('{')) return "header does not start with '{'";
    for (;;) {
      skip_ws();
      if (eat('}')) break;
      std::string key;
      if (!quoted(key)) return "expected a quoted key";
      skip_ws();
      if (!eat(':')) return "expected ':' after '" + key + "'";
      skip_ws();
      if (key == "descr") {
        if (have_descr || !quoted(descr)) return "bad or repeated 'descr'";
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) return "repeated 'fortran_order'";
        if (word("True"))
          fortran = true;
        else if (word("False"))
          fortran = false;
        else
          return "'fortran_order' is not True or False";
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) return "repeated 'shape'";
        if (std::string err = tuple(shape); !err.empty()) return err;
        have_shape = true;
      } else {
        return "unknown key '" + key + "'";
      }
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return "expected ',' or '}'";
    }
    skip_ws();
    if (pos_ != h_.size()) return "bytes after the header dict";
    if (!have_descr || !have_order || !have_shape) return "header lacks 'descr', 'fortran_order' or 'shape'";
    return {};
  }

 private:
  void skip_ws() {
    while (pos_ < h_.size() && (h_[pos_] == ' ' || h_[pos_] == '\n' || h_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < h_.size() && h_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (h_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool quoted(std::string& out) {
    if (!eat('\'')) return false;
    const size_t end = h_.find('\'', pos_);
    if (end == std::string_view::npos || end - pos_ > 64) return false;
    out.assign(h_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  std::string tuple(std::vector<uint64_t>& shape) {
    if (!eat('(')) return "'shape' is not a tuple";
    for (;;) {
      skip_ws();
      if (eat(')')) return {};
      if (pos_ >= h_.size() || h_[pos_] < '0' || h_[pos_] > '9')
        return "'shape' holds a value that is not a non-negative integer";
      uint64_t v = 0;
      while (pos_ < h_.size() && h_[pos_] >= '0' && h_[pos_] <= '9') {
        auto next = v > UINT64_MAX / 10 ? std::nullopt : checked_add(v * 10, static_cast<uint64_t>(h_[pos_] - '0'));
        if (!next) return "'shape' dimension does not fit 64 bits";
        v = *next;
        ++pos_;
      }
      if (shape.size() >= kMaxNpyRank) return "'shape' has more than 32 dimensions";
      shape.push_back(v);
      skip_ws();
      if (eat(')')) return {};
      if (!eat(',')) return "expected ',' or ')' in 'shape'";
    }
  }

  std::string_view h_;
  size_t pos_ = 0;
};

}  // namespace

Result<NpyArray> parse_npy(std::span<const std::byte> file, std::string_view source) {
  const std::string src(source);
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  if (file.size() < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return invalid_file("npy.magic", src + ": not a .npy file");
  const unsigned major = p[6];
  uint64_t hl = 0, prefix = 0;
  if (major == 1) {
    hl = static_cast<uint64_t>(p[8]) | static_cast<uint64_t>(p[9]) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return invalid_file("npy.truncated", src + ": file ends inside the header length");
    for (int i = 0; i < 4; ++i) hl |= static_cast<uint64_t>(p[8 + i]) << (8 * i);
    prefix = 12;
  } else {
    return invalid_file("npy.version", src + ": unsupported .npy version " + std::to_string(major));
  }
  if (hl > kMaxNpyHeaderBytes)
    return invalid_file("npy.header_too_large", src + ": header length " + std::to_string(hl) + " exceeds 1 MiB");
  if (hl > file.size() - prefix)
    return invalid_file("npy.truncated",
                        src + ": header length " + std::to_string(hl) + " runs past the end of the file");
  const std::string_view h(reinterpret_cast<const char*>(p + prefix), hl);
  NpyArray a;
  bool fortran = false;
  if (std::string err = NpyHeaderParser(h).parse(a.descr, fortran, a.shape); !err.empty())
    return invalid_file("npy.header_syntax", src + ": " + err);
  if (fortran) return invalid_file("npy.order", src + ": only C-order arrays are supported");
  if (!is_supported_descr(a.descr)) return invalid_file("npy.descr", src + ": unsupported dtype '" + a.descr + "'");
  const size_t sz = descr_size(a.descr);
  auto bytes = checked_product(a.shape);
  if (bytes) bytes = checked_mul(*bytes, sz);
  if (!bytes) return invalid_file("npy.size_overflow", src + ": shape × dtype size overflows 64 bits");
  // A2: the data size is checked against the file before the buffer is allocated.
  const uint64_t available = file.size() - prefix - hl;
  if (*bytes > available)
    return invalid_file("npy.truncated_data", src + ": shape needs " + std::to_string(*bytes) +
                                                  " data bytes, file has " + std::to_string(available));
  if (*bytes < available)
    return invalid_file("npy.trailing_bytes",
                        src + ": " + std::to_string(available - *bytes) + " bytes after the array data");
  const std::byte* data = file.data() + prefix + hl;
  a.bytes.assign(data, data + *bytes);
  return a;
}

Result<NpyArray> read_npy(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) {
    if (mapped.status().code() == StatusCode::kNotFound)
      return not_found("npy.missing", path.string() + ": no such file");
    return mapped.status();
  }
  return parse_npy((*mapped)->bytes(), path.string());
}

namespace {

Status write_npy(const std::filesystem::path& path, const std::string& descr, const std::vector<uint64_t>& shape,
                 const void* data, size_t elem_size) {
  std::string shape_s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shape_s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  shape_s += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_s + ", }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("npy.write_open", path.string() + ": cannot open for writing");
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  const uint16_t hl = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n * elem_size));
  return f.good() ? Status::ok() : io_error("npy.write", path.string() + ": write failed");
}

}  // namespace

uint64_t NpyArray::n_elements() const {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// One stored value to Out. Float to integer saturates and maps NaN to 0: a value read from a file must
// never reach an out-of-range (undefined) cast. Found by the npy fuzz target.
template <typename Out, typename In>
static Out convert_value(In v) {
  if constexpr (std::is_integral_v<Out> && std::is_floating_point_v<In>) {
    constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in double
    const double d = static_cast<double>(v);
    if (std::isnan(d)) return 0;
    if (d >= kTwo63) return std::numeric_limits<Out>::max();
    if (d < -kTwo63) return std::numeric_limits<Out>::min();
    return static_cast<Out>(d);
  } else {
    return static_cast<Out>(v);
  }
}

template <typename Out>
static std::vector<Out> convert(const NpyArray& a) {
  const uint64_t n = a.n_elements();
  std::vector<Out> out(n);
  const char kind = a.descr.size() > 1 ? a.descr[1] : '?';
  const size_t sz = descr_size(a.descr);
  for (uint64_t i = 0; i < n; ++i) {
    const std::byte* p = a.bytes.data() + i * sz;
    if (kind == 'f' && sz == 4) {
      float v;
      std::memcpy(&v, p, 4);
      out[i] = convert_value<Out>(v);
    } else if (kind == 'f' && sz == 8) {
      double v;
      std::memcpy(&v, p, 8);
      out[i] = convert_value<Out>(v);
    } else if (kind == 'i' && sz == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      out[i] = static_cast<Out>(v);
    } else if (kind == 'i' && sz == 8) {
      int64_t v;
      std::memcpy(&v, p, 8);
      out[i] = static_cast<Out>(v);
    } else if (kind == 'u' && sz == 1) {
      out[i] = static_cast<Out>(static_cast<uint8_t>(*p));
    } else if (kind == 'i' && sz == 1) {
      out[i] = static_cast<Out>(static_cast<int8_t>(*p));
    } else if (kind == 'b' && sz == 1) {
      out[i] = static_cast<Out>(static_cast<uint8_t>(*p) != 0);
    }
  }
  return out;
}

std::vector<float> NpyArray::to_f32() const {
  return convert<float>(*this);
}
std::vector<int64_t> NpyArray::to_i64() const {
  return convert<int64_t>(*this);
}

Status write_npy_f32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const float* data) {
  return write_npy(path, "<f4", shape, data, 4);
}
Status write_npy_i32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const int32_t* data) {
  return write_npy(path, "<i4", shape, data, 4);
}

}  // namespace dsv4
