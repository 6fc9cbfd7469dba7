// io: .npy reader/writer.
#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/checked_math.h"

namespace dsv4 {
namespace {

size_t descr_size(const std::string& d) {
  if (d.size() < 3) return 0;
  return static_cast<size_t>(std::atoi(d.c_str() + 2));
}

// Extracts the value text following 'key': in the header dict.
std::string dict_value(const std::string& h, const std::string& key) {
  const auto k = h.find("'" + key + "'");
  if (k == std::string::npos) return {};
  auto p = h.find(':', k);
  if (p == std::string::npos) return {};
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  if (p >= h.size()) return {};
  if (h[p] == '\'') {
    const auto e = h.find('\'', p + 1);
    return e == std::string::npos ? std::string{} : h.substr(p + 1, e - p - 1);
  }
  if (h[p] == '(') {
    const auto e = h.find(')', p);
    return e == std::string::npos ? std::string{} : h.substr(p, e - p + 1);
  }
  const auto e = h.find_first_of(",}", p);
  return h.substr(p, e - p);
}

Status write_npy(const std::filesystem::path& path, const std::string& descr, const std::vector<uint64_t>& shape,
                 const void* data, size_t elem_size) {
  std::string shape_s = "(";
  for (size_t i = 0; i < shape.size(); ++i) shape_s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
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

template <typename Out>
static std::vector<Out> convert(const NpyArray& a) {
  const uint64_t n = a.n_elements();
  std::vector<Out> out(n);
  const char kind = a.descr.size() > 1 ? a.descr[1] : '?';
  const size_t sz = descr_size(a.descr);
  for (uint64_t i = 0; i < n; ++i) {
    const std::byte* p = a.bytes.data() + i * sz;
    if (kind == 'f' && sz == 4) { float v; std::memcpy(&v, p, 4); out[i] = static_cast<Out>(v); }
    else if (kind == 'f' && sz == 8) { double v; std::memcpy(&v, p, 8); out[i] = static_cast<Out>(v); }
    else if (kind == 'i' && sz == 4) { int32_t v; std::memcpy(&v, p, 4); out[i] = static_cast<Out>(v); }
    else if (kind == 'i' && sz == 8) { int64_t v; std::memcpy(&v, p, 8); out[i] = static_cast<Out>(v); }
    else if (kind == 'u' && sz == 1) { out[i] = static_cast<Out>(static_cast<uint8_t>(*p)); }
    else if (kind == 'i' && sz == 1) { out[i] = static_cast<Out>(static_cast<int8_t>(*p)); }
    else if (kind == 'b' && sz == 1) { out[i] = static_cast<Out>(static_cast<uint8_t>(*p) != 0); }
  }
  return out;
}

std::vector<float> NpyArray::to_f32() const { return convert<float>(*this); }
std::vector<int64_t> NpyArray::to_i64() const { return convert<int64_t>(*this); }

Result<NpyArray> read_npy(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("npy.missing", path.string() + ": cannot open");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return invalid_file("npy.magic", path.string() + ": not a .npy file");
  uint32_t hl = 0;
  if (magic[6] == 1) {
    uint16_t h16;
    if (!f.read(reinterpret_cast<char*>(&h16), 2)) return invalid_file("npy.truncated", path.string());
    hl = h16;
  } else if (magic[6] == 2 || magic[6] == 3) {
    if (!f.read(reinterpret_cast<char*>(&hl), 4)) return invalid_file("npy.truncated", path.string());
  } else {
    return invalid_file("npy.version", path.string() + ": unsupported .npy version");
  }
  if (hl > (1u << 20)) return invalid_file("npy.header_too_large", path.string());
  std::string h(hl, '\0');
  if (!f.read(h.data(), hl)) return invalid_file("npy.truncated", path.string());
  NpyArray a;
  a.descr = dict_value(h, "descr");
  if (dict_value(h, "fortran_order") != "False")
    return invalid_file("npy.order", path.string() + ": only C-order arrays are supported");
  const size_t sz = descr_size(a.descr);
  if (a.descr.size() < 3 || (a.descr[0] != '<' && a.descr[0] != '|') || sz == 0 || sz > 8)
    return invalid_file("npy.descr", path.string() + ": unsupported dtype '" + a.descr + "'");
  const std::string shape_s = dict_value(h, "shape");
  if (shape_s.empty() || shape_s.front() != '(') return invalid_file("npy.shape", path.string());
  std::stringstream ss(shape_s.substr(1, shape_s.size() - 2));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (v < 0) return invalid_file("npy.shape", path.string() + ": negative dimension");
    a.shape.push_back(static_cast<uint64_t>(v));
  }
  auto bytes = checked_product(a.shape);
  if (bytes) bytes = checked_mul(*bytes, sz);
  if (!bytes || *bytes > (64ull << 30)) return invalid_file("npy.size", path.string() + ": size overflow");
  a.bytes.resize(*bytes);
  if (!f.read(reinterpret_cast<char*>(a.bytes.data()), static_cast<std::streamsize>(*bytes)))
    return invalid_file("npy.truncated", path.string() + ": data shorter than the shape says");
  return a;
}

Status write_npy_f32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const float* data) {
  return write_npy(path, "<f4", shape, data, 4);
}
Status write_npy_i32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const int32_t* data) {
  return write_npy(path, "<i4", shape, data, 4);
}

}  // namespace dsv4
