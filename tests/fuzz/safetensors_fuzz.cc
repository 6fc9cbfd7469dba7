// fuzz: SafetensorsFile::parse on arbitrary bytes. Accepted files must describe tensors that lie inside
// the input, tile the data section, and agree with their shapes.
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/checked_math.h"
#include "fuzz_targets.h"
#include "io/safetensors.h"

namespace dsv4::fuzz {

int safetensors_entry(const uint8_t* data, size_t size) {
  // Copy into an exactly sized heap buffer so ASan sees any read past the end.
  std::unique_ptr<std::byte[]> buf(new std::byte[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(buf.get(), data, size);
  const std::span<const std::byte> file(buf.get(), size);
  auto r = SafetensorsFile::parse(file, "fuzz.safetensors");
  if (!r.is_ok()) {
    DSV4_CHECK(r.status().code() == StatusCode::kInvalidFile && !r.status().rule().empty(), r.status().to_string());
    return 0;
  }
  uint64_t total = 0;
  for (const TensorInfo& t : *r) {
    DSV4_CHECK(t.shape.size() <= kMaxTensorRank);
    DSV4_CHECK(checked_product(t.shape) == t.n_elements);
    DSV4_CHECK(t.n_elements * dtype_size(t.dtype) == t.data.size());
    DSV4_CHECK(t.data.empty() ||
               (t.data.data() >= file.data() + 8 && t.data.data() + t.data.size() <= file.data() + file.size()));
    if (!t.data.empty()) {  // touch both ends
      volatile std::byte first = t.data.front(), last = t.data.back();
      (void)first;
      (void)last;
    }
    total += t.data.size();
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.data(), 8);
  DSV4_CHECK(total == size - 8 - header_len, "tensors must tile the data section");
  return 0;
}

}  // namespace dsv4::fuzz
