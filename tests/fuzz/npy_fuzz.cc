// fuzz: parse_npy (the parser behind read_npy) on arbitrary bytes. An accepted array holds exactly
// shape × itemsize bytes, and both conversions produce one value per element.
#include <cstring>
#include <memory>

#include "core/check.h"
#include "core/checked_math.h"
#include "fuzz_targets.h"
#include "io/npy.h"

namespace dsv4::fuzz {

int npy_entry(const uint8_t* data, size_t size) {
  std::unique_ptr<std::byte[]> buf(new std::byte[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(buf.get(), data, size);
  auto r = parse_npy(std::span<const std::byte>(buf.get(), size), "fuzz.npy");
  if (!r.is_ok()) {
    DSV4_CHECK(r.status().code() == StatusCode::kInvalidFile && !r.status().rule().empty(), r.status().to_string());
    return 0;
  }
  const auto n = checked_product(r->shape);
  DSV4_CHECK(n.has_value() && *n == r->n_elements());
  DSV4_CHECK(r->bytes.size() <= size);
  DSV4_CHECK(r->to_f32().size() == *n && r->to_i64().size() == *n);
  return 0;
}

}  // namespace dsv4::fuzz
