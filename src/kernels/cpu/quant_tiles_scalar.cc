// kernels: the portable scalar tiles and the ISA → tile table. The scalar tiles are the plain reference:
// weights dequantized exactly as the reference does (fp32 value · 2^(e−127)), products and sums in
// double, one rounding to fp32 at the end (golden/README.md numerics contract).
#include <bit>
#include <cstring>

#include "core/formats.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// The high 16 bits of x (its bf16 bits when x is exact in bf16).
inline uint32_t bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits >> 16;
}

constexpr float e8m0_entry(int e) {
  if (e == 255) return std::bit_cast<float>(0x7FC00000u);
  if (e == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127 is an fp32 subnormal
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}


}  // namespace

const float kE8m0ToFloat[256] = {
#define DSV4_E8M0_ROW(b)                                                                              \
  e8m0_entry(b + 0), e8m0_entry(b + 1), e8m0_entry(b + 2), e8m0_entry(b + 3), e8m0_entry(b + 4),       \
      e8m0_entry(b + 5), e8m0_entry(b + 6), e8m0_entry(b + 7), e8m0_entry(b + 8), e8m0_entry(b + 9),   \
      e8m0_entry(b + 10), e8m0_entry(b + 11), e8m0_entry(b + 12), e8m0_entry(b + 13), e8m0_entry(b + 14), \
      e8m0_entry(b + 15)
    DSV4_E8M0_ROW(0),   DSV4_E8M0_ROW(16),  DSV4_E8M0_ROW(32),  DSV4_E8M0_ROW(48),
    DSV4_E8M0_ROW(64),  DSV4_E8M0_ROW(80),  DSV4_E8M0_ROW(96),  DSV4_E8M0_ROW(112),
    DSV4_E8M0_ROW(128), DSV4_E8M0_ROW(144), DSV4_E8M0_ROW(160), DSV4_E8M0_ROW(176),
    DSV4_E8M0_ROW(192), DSV4_E8M0_ROW(208), DSV4_E8M0_ROW(224), DSV4_E8M0_ROW(240),
#undef DSV4_E8M0_ROW
};

void bf16_tile_scalar(Bf16Tile& t) {
  for (int r = 0; r < t.n_rows; ++r) {
    for (int tok = 0; tok < t.n_tokens; ++tok) {
      const float* x = t.x + tok * t.ldx;
      double acc = 0.0;
      for (int64_t k = 0; k < t.k; ++k) acc += static_cast<double>(x[k]) * static_cast<double>(bf16_to_float(t.w[r][k]));
      t.sums[r][tok] = static_cast<float>(acc);
    }
  }
}

void fp8_tile_scalar(Fp8Tile& t) {
  for (int r = 0; r < t.n_rows; ++r) {
    for (int tok = 0; tok < t.n_tokens; ++tok) {
      const float* x = t.x + tok * t.ldx;
      double acc = 0.0;
      for (int64_t k = 0; k < t.k; ++k) {
        const float w = e4m3_to_float(t.w[r][k]) * e8m0_to_float(t.s[r][k / 128]);
        acc += static_cast<double>(x[k]) * static_cast<double>(w);
      }
      t.sums[r][tok] = static_cast<float>(acc);
    }
  }
}

void fp4_tile_scalar(Fp4Tile& t) {
  for (int r = 0; r < t.n_rows; ++r) {
    for (int tok = 0; tok < t.n_tokens; ++tok) {
      const float* x = t.x + tok * t.ldx;
      double acc = 0.0;
      for (int64_t k = 0; k < t.k; ++k) {
        const uint8_t byte = t.w[r][k / 2];
        const float code = (k & 1) ? e2m1_unpack_hi(byte) : e2m1_unpack_lo(byte);
        const float w = code * e8m0_to_float(t.s[r][k / 32]);
        acc += static_cast<double>(x[k]) * static_cast<double>(w);
      }
      t.sums[r][tok] = static_cast<float>(acc);
    }
  }
}

Bf16TileFn bf16_tile_for(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512Bf16:
      return bf16_tile_avx512bf16;
    case Isa::kAmx:
    case Isa::kAvx512:
      return bf16_tile_avx512;
    case Isa::kAvx2:
      return bf16_tile_avx2;
#endif
    default:
      return bf16_tile_scalar;
  }
}

Fp8TileFn fp8_tile_for(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAmx:  // AMX only takes prefill-sized GEMMs; smaller ones use the AVX-512 tiles
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      return fp8_tile_avx512;
    case Isa::kAvx2:
      return fp8_tile_avx2;
#endif
    default:
      return fp8_tile_scalar;
  }
}

#if defined(__x86_64__)
bool fp8_avx2_rebias() {
  return !is_intel_cpu();
}
#endif

int64_t fp8_scratch_floats(Isa isa, int64_t n_tokens, int64_t k) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx2 && fp8_avx2_rebias()) return n_tokens * fp8_avx2_stride(k);
#endif
  return isa == Isa::kAvx512Bf16 ? n_tokens * fp8_bf16pairs_stride(k) : 0;
}

Fp8Operand fp8_operand(Isa isa, const float* x, int64_t n_tokens, int64_t k, float* scratch) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512Bf16) {
    if (fp8_prepare_x_bf16pairs(x, n_tokens, k, scratch)) return {fp8_tile_avx512bf16, scratch, fp8_bf16pairs_stride(k)};
    note_bf16_refusal();
  }
  if (isa == Isa::kAvx2 && fp8_avx2_rebias()) {
    fp8_prepare_x_avx2(x, n_tokens, k, scratch);
    return {fp8_tile_avx2_prepared, scratch, fp8_avx2_stride(k)};
  }
#endif
  return {fp8_tile_for(isa), x, k};
}

Fp4Kernel fp4_kernel_for(Isa isa, XExact x) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512Bf16:
      if (x == XExact::kBf16Dot) return {fp4_tile_avx512bf16, Fp4XLayout::kBf16Pairs};
      note_bf16_refusal();  // once per call, whichever AVX-512 tile takes it
      if (x == XExact::kBf16) return {fp4_tile_avx512_planes, Fp4XLayout::kNibblePlanes};
      return {fp4_tile_avx512, Fp4XLayout::kBlockOrder};
    case Isa::kAmx:
    case Isa::kAvx512:
      if (x != XExact::kNone) return {fp4_tile_avx512_planes, Fp4XLayout::kNibblePlanes};
      note_bf16_refusal();
      return {fp4_tile_avx512, Fp4XLayout::kBlockOrder};
    case Isa::kAvx2:
      return {fp4_tile_avx2, Fp4XLayout::kAvx2Fixed};
#endif
    default:
      return {fp4_tile_scalar, Fp4XLayout::kNatural};
  }
}


Fp4Kernel fp4_kernel_for_x(Isa isa, const float* x, int64_t n) {
  const bool decides = isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16 || isa == Isa::kAmx;
  return fp4_kernel_for(isa, decides ? x_exactness(x, n) : XExact::kNone);
}

bool bf16_exact(const float* x, int64_t n) {
  uint32_t low = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    low |= bits & 0xFFFFu;
  }
  return low == 0;
}

XExact x_exactness(const float* x, int64_t n) {
  // Two flags over all values, no early exit (the scan stays a plain vectorizable loop): low bits set
  // anywhere, and a nonzero magnitude below 2^-100 (bits of |x| in (0, 27 << 23)).
  uint32_t low = 0;
  bool tiny = false;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    low |= bits & 0xFFFFu;
    const uint32_t mag = bits & 0x7FFFFFFFu;
    tiny |= mag - 1u < (27u << 23) - 1u;
  }
  if (low != 0) return XExact::kNone;
  return tiny ? XExact::kBf16 : XExact::kBf16Dot;
}

int64_t bf16_x_stride(int64_t k) { return (k + 31) / 32 * 32; }

int64_t fp4_x_stride(Fp4XLayout layout, int64_t k) {
  switch (layout) {
    case Fp4XLayout::kNibblePlanes: return (k + 127) / 128 * 128;
    case Fp4XLayout::kBf16Pairs: return (k + 127) / 128 * 64;
#if defined(__x86_64__)
    case Fp4XLayout::kAvx2Fixed: return fp4_avx2_stride(k);
#endif
    default: return k;
  }
}

void fp4_prepare_x(Fp4XLayout layout, const float* x, int64_t n_tokens, int64_t k, float* out) {
#if defined(__x86_64__)
  if (layout == Fp4XLayout::kAvx2Fixed) return fp4_prepare_x_avx2(x, n_tokens, k, out);
#endif
  const int64_t stride = fp4_x_stride(layout, k);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * k;
    float* o = out + t * stride;
    switch (layout) {
      case Fp4XLayout::kNatural:
        std::memcpy(o, xr, sizeof(float) * static_cast<size_t>(k));
        break;
      case Fp4XLayout::kBlockOrder:
        for (int64_t b = 0; b < k; b += 32) {
          for (int i = 0; i < 16; ++i) {
            o[b + i] = xr[b + 2 * i];
            o[b + 16 + i] = xr[b + 2 * i + 1];
          }
        }
        break;
      case Fp4XLayout::kAvx2Fixed:  // fp4_prepare_x_avx2 above (selected on x86-64 only)
        break;
      case Fp4XLayout::kNibblePlanes:
        // Chunk c's plane q, lane i ← element 128c + 8i + q; past k (a partial last chunk) zeros.
        for (int64_t c = 0; c < stride; c += 128) {
          float* oc = o + c;
          if (c + 128 <= k) {
            for (int i = 0; i < 16; ++i)
              for (int q = 0; q < 8; ++q) oc[16 * q + i] = xr[c + 8 * i + q];
          } else {
            for (int i = 0; i < 16; ++i)
              for (int q = 0; q < 8; ++q) oc[16 * q + i] = c + 8 * i + q < k ? xr[c + 8 * i + q] : 0.0f;
          }
        }
        break;
      case Fp4XLayout::kBf16Pairs:
        // Chunk c's plane q, slot i ← elements 128c + 8i + q (low) and + 4 (high) as bf16 (the high half of
        // each float: the caller checked XExact::kBf16Dot); past k (a partial last chunk) zeros.
        for (int64_t c = 0; c < 2 * stride; c += 128) {
          float* oc = o + c / 2;
          for (int q = 0; q < 4; ++q)
            for (int i = 0; i < 16; ++i) {
              const int64_t e = c + 8 * i + q;
              const uint32_t lo = e < k ? bf16_bits(xr[e]) : 0u, hi = e + 4 < k ? bf16_bits(xr[e + 4]) : 0u;
              const uint32_t pair = lo | hi << 16;
              std::memcpy(oc + 16 * q + i, &pair, sizeof pair);
            }
        }
        break;
    }
  }
}

}  // namespace dsv4::kernels::detail
