// core: overflow-checked size arithmetic for numbers that come from untrusted files and requests.
// Every size derived from a file goes through these before it is used to index or allocate.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace dsv4 {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_sub(uint64_t a, uint64_t b) {
  if (b > a) return std::nullopt;
  return a - b;
}

// Product of all dims; nullopt on overflow. The empty product is 1 (a scalar).
inline std::optional<uint64_t> checked_product(std::span<const uint64_t> dims) {
  uint64_t r = 1;
  for (uint64_t d : dims) {
    auto next = checked_mul(r, d);
    if (!next) return std::nullopt;
    r = *next;
  }
  return r;
}

}  // namespace dsv4
