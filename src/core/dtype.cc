// core: dtype table.
#include "core/dtype.h"

#include <array>
#include <utility>

namespace dsv4 {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 8> kNames = {{
    {DType::kBF16, "BF16"},
    {DType::kF16, "F16"},
    {DType::kF32, "F32"},
    {DType::kF8E4M3, "F8_E4M3"},
    {DType::kF8E8M0, "F8_E8M0"},
    {DType::kI8, "I8"},
    {DType::kI32, "I32"},
    {DType::kI64, "I64"},
}};
}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF8E4M3:
    case DType::kF8E8M0:
    case DType::kI8: return 1;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& [d, n] : kNames)
    if (d == t) return n;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& [d, n] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

}  // namespace dsv4
