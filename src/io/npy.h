// io: NumPy .npy files (version 1/2, little-endian, C order): the format of the golden data and of
// `dsv4 logits` output. Reading validates the header like any untrusted file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dsv4 {

struct NpyArray {
  std::string descr;            // "<f4", "<i4", "<i8", ...
  std::vector<uint64_t> shape;  // outermost first
  std::vector<std::byte> bytes;

  uint64_t n_elements() const;
  // Converts to float / int64 whatever the stored numeric type is ("<f4", "<f8", "<i4", "<i8", "|u1"...).
  std::vector<float> to_f32() const;
  std::vector<int64_t> to_i64() const;
};

// Reads a .npy file: maps it and runs parse_npy. Every size in the header is checked against the file
// before anything is allocated from it.
Result<NpyArray> read_npy(const std::filesystem::path& path);
// Validates and decodes a whole .npy file held in memory; `source` names it in error messages.
// Accepted dtypes: <f4 <f8 <i4 <i8 |u1 |i1 |b1 (the ones to_f32/to_i64 convert); C order only.
Result<NpyArray> parse_npy(std::span<const std::byte> file, std::string_view source);
Status write_npy_f32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const float* data);
Status write_npy_i32(const std::filesystem::path& path, const std::vector<uint64_t>& shape, const int32_t* data);

}  // namespace dsv4
