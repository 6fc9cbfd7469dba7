// core: element types of checkpoint tensors and their byte sizes. Names follow safetensors' dtype strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dsv4 {

enum class DType {
  kBF16,
  kF16,
  kF32,
  kF8E4M3,  // OCP E4M3FN: bias 7, max ±448, no inf, S.1111.111 = NaN
  kF8E8M0,  // ue8m0 power-of-two scale: 2^(e-127), 0xFF = NaN
  kI8,      // on disk also used for packed E2M1 (two FP4 values per byte, low nibble first)
  kI32,
  kI64,
};

// Bytes per stored element (I8 counts one byte even when it holds two FP4 nibbles).
size_t dtype_size(DType t);
// The safetensors spelling: "BF16", "F8_E4M3", ...
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string; nullopt for anything this engine does not accept.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace dsv4
