// unit: kernels::act_quant_fp8 against core/quant.cc's fake_quant_fp8 (the spec §3 reference quantizer),
// bit for bit on every ISA: every E4M3 code and the midpoints between neighbouring codes (±1 ulp) at
// scales from the 1e-4 floor to 2^119, blocks whose absmax is a power of two, subnormal and huge inputs,
// ±0, ±inf and NaN (absmax ignores NaN; a NaN or inf/inf quotient takes the codec's NaN; an inf absmax
// makes s = inf), block lengths off the 16-lane vector, misaligned pointers, in place and out of place,
// with and without the bf16 rounding first, and random rows. A one-off sweep of every finite float is
// DISABLED_ (about 10 minutes on one core; run with --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "kernels/cpu/act_quant.h"
#include "kernel_isas.h"

namespace dsv4::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The reference: bf16 rounding (w2's input) then core's fake_quant_fp8.
std::vector<float> reference(const std::vector<float>& x, int64_t block, bool bf16_first) {
  std::vector<float> want = x;
  if (bf16_first)
    for (float& v : want) v = round_bf16(v);
  fake_quant_fp8(std::span<float>(want), static_cast<size_t>(block));
  return want;
}

// Every ISA, out of place (at `misalign` floats past a 64-byte boundary) and in place, with and without
// the bf16 rounding, must give the reference's bits.
void expect_reference_bits(const std::vector<float>& x, int64_t block, const std::string& label, int misalign = 0) {
  const auto n = static_cast<int64_t>(x.size());
  for (bool bf16_first : {false, true}) {
    const std::vector<float> want = reference(x, block, bf16_first);
    for (Isa isa : isas()) {
      std::vector<float> src(x.size() + 32), dst(x.size() + 32, kNaN);
      float* in = src.data() + misalign;
      float* out = dst.data() + (misalign + 5) % 16;
      std::copy(x.begin(), x.end(), in);
      act_quant_fp8(in, out, n, block, bf16_first, isa);
      act_quant_fp8(in, in, n, block, bf16_first, isa);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want[i]))
            << label << " isa " << isa_name(isa) << " bf16 " << bf16_first << " block " << block << " element " << i
            << ": x " << x[i] << " got " << out[i] << " want " << want[i];
        ASSERT_EQ(std::bit_cast<uint32_t>(in[i]), std::bit_cast<uint32_t>(want[i]))
            << label << " in place, isa " << isa_name(isa) << " element " << i;
      }
    }
  }
}

// Every finite E4M3 magnitude (codes 0..126), its midpoints with the next code and the floats one ulp
// either side of each, both signs.
std::vector<float> code_points() {
  std::vector<float> v;
  for (int c = 0; c <= 126; ++c) {
    const float a = e4m3_to_float(static_cast<uint8_t>(c));
    v.push_back(a);
    v.push_back(std::nextafter(a, kInf));
    if (c > 0) v.push_back(std::nextafter(a, 0.0f));
    if (c < 126) {
      const float mid = (a + e4m3_to_float(static_cast<uint8_t>(c + 1))) / 2;  // exact: both have 4 bits
      for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) v.push_back(m);
    }
  }
  for (float m : {448.5f, 464.0f, 480.0f, 1000.0f}) v.push_back(m);  // clamped
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// Blocks of `block` whose first element is `lead` (which sets the absmax unless another is larger),
// filled from `values` · 2^e in order; the last block is padded with zeros.
std::vector<float> blocks_of(const std::vector<float>& values, float lead, int e, int64_t block) {
  std::vector<float> x;
  size_t next = 0;
  while (next < values.size()) {
    x.push_back(lead);
    for (int64_t j = 1; j < block; ++j) x.push_back(next < values.size() ? std::ldexp(values[next++], e) : 0.0f);
  }
  return x;
}

TEST(KernelActQuant, EveryCodeAndMidpointAtEveryScale) {
  const std::vector<float> points = code_points();
  // 2^-30: every block's scale at the 1e-4 floor (2^-22); 119: the largest finite scale.
  for (int e : {-30, -22, -9, -1, 0, 1, 8, 40, 100, 119})
    for (int64_t block : {128, 64, 16, 24})
      expect_reference_bits(blocks_of(points, std::ldexp(448.0f, e), e, block), block, "e " + std::to_string(e),
                            static_cast<int>(block % 7));
  // The same values under a scale set by a larger lead (q loses bits, subnormals of e4m3 mostly vanish).
  expect_reference_bits(blocks_of(points, 3.0e5f, 0, 128), 128, "lead 3e5");
}

TEST(KernelActQuant, AbsmaxAtFloorPowersOfTwoAndNeighbours) {
  std::vector<float> amaxes{0.0f, 1e-30f, 1e-4f, std::nextafter(1e-4f, 0.0f), std::nextafter(1e-4f, kInf),
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()};
  for (int e = -40; e <= 127; e += 3)
    for (float m : {1.0f, 448.0f}) {
      const float p = std::ldexp(m, e);
      if (!std::isfinite(p)) continue;
      amaxes.insert(amaxes.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf)});
    }
  amaxes.push_back(std::numeric_limits<float>::max());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float a : amaxes) {
    std::vector<float> x(64);
    for (float& v : x) v = u(rng) * a;
    x[static_cast<size_t>(rng() % 64)] = (rng() & 1) ? a : -a;
    expect_reference_bits(x, 64, "amax " + std::to_string(a));
  }
}

TEST(KernelActQuant, ZerosSubnormalsInfAndNaN) {
  const float dmin = std::numeric_limits<float>::denorm_min(), fmax = std::numeric_limits<float>::max();
  const std::vector<std::vector<float>> rows{
      std::vector<float>(32, 0.0f),
      std::vector<float>(32, -0.0f),
      {0.0f, -0.0f, dmin, -dmin, 3 * dmin, 1e-39f, -1e-38f, 1e-5f, -0.0f, 0.0f, 2e-45f, 0.0f, -7e-40f, 0.0f, 1e-4f, -0.0f},
      {fmax, -fmax, 1.0f, -1.0f, 0.0f, -0.0f, 3e37f, -3e38f, 1e30f, dmin, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f},
      {kInf, 1.0f, -1.0f, 0.0f, -0.0f, 448.0f, -kInf, fmax, kNaN, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f},
      {kNaN, 1.0f, -1.0f, 0.0f, -0.0f, 448.0f, -3.5f, 1e-3f, kNaN, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, -kNaN},
      std::vector<float>(16, kNaN),
      {-kInf, -0.0f, 0.0f, 1.0f, -kNaN, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f},
      {std::bit_cast<float>(0x7FA00001u), 1.0f, std::bit_cast<float>(0xFF800001u), 0.5f, 0.25f, 0.125f, 0.0625f,
       0.03125f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f},  // signalling NaNs
  };
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t block : {16, 8}) {
      if (rows[r].size() % static_cast<size_t>(block) != 0) continue;
      expect_reference_bits(rows[r], block, "row " + std::to_string(r), static_cast<int>(r % 3));
    }
}

// A NaN in every lane position of a block (first vector, last vector, tail): the absmax must skip it
// wherever the vector reduction meets it, and the other elements keep the finite block's scale.
TEST(KernelActQuant, NaNAtEveryPositionIsLeftOutOfTheAbsmax) {
  for (int64_t block : {16, 40, 128})
    for (int64_t p = 0; p < block; ++p)
      for (float nan : {kNaN, -kNaN}) {
        std::vector<float> x(static_cast<size_t>(block));
        for (int64_t i = 0; i < block; ++i) x[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i + 1);
        x[static_cast<size_t>(p)] = nan;
        expect_reference_bits(x, block, "NaN at " + std::to_string(p));
      }
}

TEST(KernelActQuant, RandomRowsAndBlockLengths) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 30);
  for (int64_t block : {1, 3, 8, 15, 16, 17, 31, 32, 33, 48, 64, 100, 128, 144, 256})
    for (int64_t n_blocks : {1, 3, 32}) {
      std::vector<float> x(static_cast<size_t>(block * n_blocks));
      const int row_exp = ex(rng);  // a row's common magnitude, plus a spread inside it
      for (float& v : x) v = std::ldexp(nd(rng), row_exp + ex(rng) / 6);
      expect_reference_bits(x, block, "random", static_cast<int>(rng() % 16));
    }
}

TEST(KernelActQuant, RejectsSizeNotAMultipleOfTheBlock) {
  std::vector<float> x(130, 1.0f);
  for (Isa isa : isas()) EXPECT_DEATH(act_quant_fp8(x.data(), x.data(), 130, 128, false, isa), "multiple of block");
}

// Every finite float (and ±inf, every NaN) through every ISA, compared with the reference: as a block of one
// (the value sets its own scale) and beside a lead of 1 (scale 2^-8, or the value's own when larger).
TEST(KernelActQuant, DISABLED_ExhaustiveEveryFloat) {
  constexpr uint64_t kChunk = uint64_t{1} << 22;
  std::vector<float> x(2 * kChunk), want, got(2 * kChunk);
  for (Isa isa : isas()) {
    // kAmx dispatches to the AVX-512 body: sweeping it again would only double the ~10 minutes.
    if (isa == Isa::kScalar || (isa == Isa::kAmx && isa_supported(Isa::kAvx512))) continue;
    uint64_t mismatches = 0;
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
      for (uint64_t i = 0; i < kChunk; ++i) x[i] = std::bit_cast<float>(static_cast<uint32_t>(base + i));
      for (int64_t block : {1, 2}) {
        const int64_t n = block == 1 ? static_cast<int64_t>(kChunk) : static_cast<int64_t>(2 * kChunk);
        if (block == 2)
          for (int64_t i = static_cast<int64_t>(kChunk) - 1; i >= 0; --i) {
            x[static_cast<size_t>(2 * i)] = std::bit_cast<float>(static_cast<uint32_t>(base + static_cast<uint64_t>(i)));
            x[static_cast<size_t>(2 * i + 1)] = 1.0f;
          }
        std::vector<float> in(x.begin(), x.begin() + n);
        want = reference(in, block, false);
        act_quant_fp8(in.data(), got.data(), n, block, false, isa);
        for (int64_t i = 0; i < n; ++i)
          if (std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]) != std::bit_cast<uint32_t>(want[static_cast<size_t>(i)]) &&
              ++mismatches <= 10)
            ADD_FAILURE() << isa_name(isa) << " block " << block << " x bits " << std::hex
                          << std::bit_cast<uint32_t>(in[static_cast<size_t>(i)]);
      }
    }
    EXPECT_EQ(mismatches, 0u) << isa_name(isa);
  }
}

}  // namespace
}  // namespace dsv4::kernels
