// unit: overflow-checked size helpers at and around 2^31, 2^32, 2^63 and 2^64−1 (reliability E2).
// Expected values come from unsigned __int128 arithmetic, which cannot overflow for these operands.
#include "core/checked_math.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsv4 {
namespace {

using u128 = unsigned __int128;
constexpr uint64_t kMax = ~uint64_t{0};

// Operands around every boundary the brief names.
std::vector<uint64_t> edge_values() {
  std::vector<uint64_t> v = {0, 1, 2, 3};
  for (int e : {31, 32, 63}) {
    const uint64_t p = uint64_t{1} << e;
    for (uint64_t x : {p - 2, p - 1, p, p + 1, p + 2}) v.push_back(x);
  }
  for (uint64_t x : {kMax - 2, kMax - 1, kMax}) v.push_back(x);
  v.push_back(uint64_t{1} << 62);
  v.push_back(0xFFFFFFFFull * 3);
  return v;
}

TEST(CheckedMath, AddAgainstWideArithmetic) {
  for (uint64_t a : edge_values())
    for (uint64_t b : edge_values()) {
      const u128 want = static_cast<u128>(a) + b;
      const auto got = checked_add(a, b);
      if (want > kMax) {
        EXPECT_FALSE(got.has_value()) << a << " + " << b;
      } else {
        ASSERT_TRUE(got.has_value()) << a << " + " << b;
        EXPECT_EQ(*got, static_cast<uint64_t>(want));
      }
    }
}

TEST(CheckedMath, MulAgainstWideArithmetic) {
  for (uint64_t a : edge_values())
    for (uint64_t b : edge_values()) {
      const u128 want = static_cast<u128>(a) * b;
      const auto got = checked_mul(a, b);
      if (want > kMax) {
        EXPECT_FALSE(got.has_value()) << a << " * " << b;
      } else {
        ASSERT_TRUE(got.has_value()) << a << " * " << b;
        EXPECT_EQ(*got, static_cast<uint64_t>(want));
      }
    }
}

TEST(CheckedMath, SubAgainstWideArithmetic) {
  for (uint64_t a : edge_values())
    for (uint64_t b : edge_values()) {
      const auto got = checked_sub(a, b);
      if (b > a) {
        EXPECT_FALSE(got.has_value()) << a << " - " << b;
      } else {
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(*got, a - b);
      }
    }
}

TEST(CheckedMath, NamedBoundaries) {
  const uint64_t p31 = uint64_t{1} << 31, p32 = uint64_t{1} << 32, p63 = uint64_t{1} << 63;
  EXPECT_EQ(checked_mul(p31, 2), p32);
  EXPECT_EQ(checked_mul(p32, p32 - 1), kMax - p32 + 1);  // 2^64 − 2^32: the largest product of these
  EXPECT_FALSE(checked_mul(p32, p32));                   // exactly 2^64
  EXPECT_EQ(checked_mul(p63, 1), p63);
  EXPECT_FALSE(checked_mul(p63, 2));
  EXPECT_EQ(checked_mul(0xFFFFFFFFull, 0x100000001ull), kMax);  // (2^32−1)(2^32+1) = 2^64 − 1 exactly
  EXPECT_FALSE(checked_mul(0x100000000ull, 0x100000001ull));
  EXPECT_EQ(checked_add(p63, p63 - 1), kMax);
  EXPECT_FALSE(checked_add(p63, p63));
  EXPECT_FALSE(checked_add(kMax, 1));
  EXPECT_EQ(checked_add(kMax, 0), kMax);
  EXPECT_EQ(checked_mul(kMax, 1), kMax);
  EXPECT_EQ(checked_mul(kMax, 0), 0u);
  EXPECT_EQ(checked_sub(0, 0), 0u);
  EXPECT_FALSE(checked_sub(0, 1));
  EXPECT_EQ(checked_sub(kMax, kMax), 0u);
}

TEST(CheckedMath, ProductOfDims) {
  using V = std::vector<uint64_t>;
  EXPECT_EQ(checked_product(V{}), 1u);  // a scalar
  EXPECT_EQ(checked_product(V{0}), 0u);
  EXPECT_EQ(checked_product(V{uint64_t{1} << 31, 2, 2}), uint64_t{1} << 33);
  EXPECT_EQ(checked_product(V{uint64_t{1} << 32, (uint64_t{1} << 32) - 1}), kMax - (uint64_t{1} << 32) + 1);
  EXPECT_FALSE(checked_product(V{uint64_t{1} << 32, uint64_t{1} << 32}));
  EXPECT_FALSE(checked_product(V{uint64_t{1} << 63, 2}));
  EXPECT_EQ(checked_product(V{0xFFFFFFFFull, 0x100000001ull}), kMax);
  EXPECT_FALSE(checked_product(V{0xFFFFFFFFull, 0x100000001ull, 2}));
  // Overflow partway is reported even if a later zero would make the true product 0: callers must not
  // trust partial products (strides) of such a shape.
  EXPECT_FALSE(checked_product(V{uint64_t{1} << 32, uint64_t{1} << 32, 0}));
  EXPECT_EQ(checked_product(V{0, uint64_t{1} << 32, uint64_t{1} << 32}), 0u);
  // Against wide arithmetic over pairs and triples of edge values.
  for (uint64_t a : edge_values())
    for (uint64_t b : edge_values())
      for (uint64_t c : {uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
        const u128 ab = static_cast<u128>(a) * b;
        const bool overflow = ab > kMax || (a != 0 && b != 0 && ab * c > kMax);
        const auto got = checked_product(V{a, b, c});
        if (overflow) {
          EXPECT_FALSE(got.has_value()) << a << "*" << b << "*" << c;
        } else {
          ASSERT_TRUE(got.has_value());
          EXPECT_EQ(*got, static_cast<uint64_t>(ab * c));
        }
      }
}

}  // namespace
}  // namespace dsv4
