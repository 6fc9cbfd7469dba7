// kernels: AMX-BF16 prefill GEMM for FP4 / FP8 weights (compiled with -mamx-tile -mamx-bf16 and AVX-512
// flags; used only when kernels/cpu/isa.cc found AMX and got the tile permission). Per 16-row block the
// weights are decoded once to bf16 in the A-tile layout (16 rows × 32 K per 1 KB step, a thread-local
// buffer of k·32 bytes), then every 32-token pair of activation tiles runs over K with TDPBF16PS into two
// fp32 accumulator tiles. The decode is amortised over all tokens, so prefill is compute-bound on AMX.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// Tiles: 0, 1 = C (16 rows × 16 tokens fp32), 2 = A (16 rows × 32 bf16), 3, 4 = B (16 pairs × 16 tokens).
constexpr int kTilesUsed = 5;

// NOTE: this file is compiled with AVX-512/AMX flags, so it must not instantiate or emit any inline or
// template code shared with baseline files (std containers, core/formats.h helpers): the linker could
// keep this copy for every caller. Hence the local bf16 rounding and the caller-provided scratch.
inline float round_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    u = (u | 0x00400000u) & 0xFFFF0000u;  // quiet NaN
  } else {
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // round to nearest even
  }
  std::memcpy(&f, &u, 4);
  return f;
}

// One weight row's 32-K step as 32 bf16 in natural K order, written to dst (64 bytes).
inline void fp4_step_to_bf16(const uint8_t* bytes16, float scale, uint16_t* dst) {
  const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f,
                                    -3.0f, -4.0f, -6.0f);
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
  const __m512 ls = _mm512_mul_ps(lut, _mm512_set1_ps(scale));
  const __m512i even = _mm512_castps_si512(_mm512_permutexvar_ps(b, ls));
  const __m512i odd = _mm512_castps_si512(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), ls));
  // The values are exact in bf16, so the bf16 bits are the fp32 bits' top half: pair = even | odd << 16.
  const __m512i pair =
      _mm512_or_si512(_mm512_srli_epi32(even, 16), _mm512_and_si512(odd, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  _mm512_storeu_si512(dst, pair);
}

inline __m512 e4m3x16_div256(__m128i codes) {
  const __m256i wd = _mm256_cvtepi8_epi16(codes);
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(wd, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  return _mm512_cvtph_ps(h);
}

inline void fp8_step_to_bf16(const uint8_t* codes32, float scale256, uint16_t* dst) {
  const __m512 s = _mm512_set1_ps(scale256);
  for (int h = 0; h < 2; ++h) {
    const __m512 v = _mm512_mul_ps(
        e4m3x16_div256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes32 + 16 * h))), s);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * h),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
  }
}

// The shared tile loop: `decode_block(nb, n_valid, apack)` fills apack [k/32][16][32] bf16 for rows
// nb..nb+n_valid (rows past n_valid must be zero).
template <typename DecodeBlock>
void amx_rows(int64_t n_rows, int64_t k, const uint32_t* xpack, int64_t n_tokens, int64_t r0, int64_t r1, float* out,
              bool round_bf16, uint16_t* apack, DecodeBlock decode_block) {
  const int64_t steps = k / 32, token_tiles = (n_tokens + 15) / 16;
  alignas(64) float c[2][16][16];
  amx_configure_tiles(kTilesUsed);
  // Token tiles are taken in chunks whose packed activations (≤ 512 KB) stay in L2 while the chunk sweeps
  // this thread's row blocks; each chunk re-decodes the row block (amortised over up to 8 × 16 tokens).
  // One token tile packs 16·k bf16 = 32·k bytes.
  int64_t chunk_tiles = (512 * 1024) / (k * 32);
  chunk_tiles = chunk_tiles < 2 ? 2 : chunk_tiles > 8 ? 8 : chunk_tiles / 2 * 2;
  for (int64_t tc = 0; tc < token_tiles; tc += chunk_tiles) {
    const int64_t tc_end = tc + chunk_tiles < token_tiles ? tc + chunk_tiles : token_tiles;
    for (int64_t nb = r0; nb < r1; nb += 16) {
      const int n_valid = static_cast<int>(r1 - nb < 16 ? r1 - nb : 16);
      decode_block(nb, n_valid, apack);
      for (int64_t tb = tc; tb < tc_end; tb += 2) {
        const bool two = tb + 1 < tc_end;
        const uint32_t* b0 = xpack + tb * steps * 256;
        const uint32_t* b1 = b0 + steps * 256;
        _tile_zero(0);
        _tile_zero(1);
        for (int64_t s = 0; s < steps; ++s) {
          _tile_loadd(2, apack + s * 512, 64);
          _tile_loadd(3, b0 + s * 256, 64);
          _tile_dpbf16ps(0, 2, 3);
          if (two) {
            _tile_loadd(4, b1 + s * 256, 64);
            _tile_dpbf16ps(1, 2, 4);
          }
        }
        _tile_stored(0, c[0], 64);
        if (two) _tile_stored(1, c[1], 64);
        for (int half = 0; half < (two ? 2 : 1); ++half) {
          const int64_t t_base = (tb + half) * 16;
          const int64_t t_end = n_tokens - t_base < 16 ? n_tokens - t_base : 16;
          for (int64_t t = 0; t < t_end; ++t) {
            float* o = out + (t_base + t) * n_rows + nb;
            for (int n = 0; n < n_valid; ++n) o[n] = round_bf16 ? round_to_bf16(c[half][n][t]) : c[half][n][t];
          }
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

bool amx_pack_x(const float* x, int64_t n_tokens, int64_t k, uint32_t* out) {
  const int64_t steps = k / 32, token_tiles = (n_tokens + 15) / 16;
  std::memset(out, 0, static_cast<size_t>(amx_packed_x_words(n_tokens, k)) * sizeof(uint32_t));
  uint32_t inexact = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * k;
    uint32_t* tile = out + (t / 16) * steps * 256 + (t % 16);
    for (int64_t p = 0; p < k / 2; ++p) {
      uint32_t lo, hi;
      std::memcpy(&lo, xr + 2 * p, 4);
      std::memcpy(&hi, xr + 2 * p + 1, 4);
      inexact |= (lo | hi) & 0xFFFFu;
      // Block (t/16, step p/16), pair row p%16, token column t%16.
      tile[(p / 16) * 256 + (p % 16) * 16] = (lo >> 16) | (hi & 0xFFFF0000u);
    }
  }
  (void)token_tiles;
  return inexact == 0;
}

void fp4_gemm_amx_rows(const AmxFp4Job& w, const uint32_t* xpack, int64_t n_tokens, int64_t r0, int64_t r1,
                       float* out, bool round_bf16, uint16_t* apack) {
  const int64_t steps = w.k / 32, half = w.k / 2;
  amx_rows(w.n_rows, w.k, xpack, n_tokens, r0, r1, out, round_bf16, apack, [&](int64_t nb, int n_valid, uint16_t* a) {
    for (int64_t s = 0; s < steps; ++s) {
      uint16_t* step = a + s * 512;
      for (int n = 0; n < n_valid; ++n) {
        const int64_t row = nb + n;
        fp4_step_to_bf16(w.packed + row * half + s * 16, kE8m0ToFloat[w.scales[row * steps + s]], step + n * 32);
      }
      if (n_valid < 16) std::memset(step + n_valid * 32, 0, static_cast<size_t>(16 - n_valid) * 64);
    }
  });
}

void bf16_gemm_amx_rows(const uint16_t* w, int64_t n_rows, int64_t k, const uint32_t* xpack, int64_t n_tokens,
                        int64_t r0, int64_t r1, float* out, bool round_bf16, uint16_t* apack) {
  const int64_t steps = k / 32;
  amx_rows(n_rows, k, xpack, n_tokens, r0, r1, out, round_bf16, apack, [&](int64_t nb, int n_valid, uint16_t* a) {
    for (int64_t s = 0; s < steps; ++s) {
      uint16_t* step = a + s * 512;
      for (int n = 0; n < n_valid; ++n) std::memcpy(step + n * 32, w + (nb + n) * k + s * 32, 64);
      if (n_valid < 16) std::memset(step + n_valid * 32, 0, static_cast<size_t>(16 - n_valid) * 64);
    }
  });
}

void fp8_gemm_amx_rows(const AmxFp8Job& w, const uint32_t* xpack, int64_t n_tokens, int64_t r0, int64_t r1,
                       float* out, bool round_bf16, uint16_t* apack) {
  const int64_t steps = w.k / 32, scale_cols = (w.k + 127) / 128;
  amx_rows(w.n_rows, w.k, xpack, n_tokens, r0, r1, out, round_bf16, apack, [&](int64_t nb, int n_valid, uint16_t* a) {
    for (int64_t s = 0; s < steps; ++s) {
      uint16_t* step = a + s * 512;
      for (int n = 0; n < n_valid; ++n) {
        const int64_t row = nb + n;
        const float scale = kE8m0ToFloat[w.scales[(row / 128) * scale_cols + (s * 32) / 128]] * 256.0f;
        fp8_step_to_bf16(w.codes + row * w.k + s * 32, scale, step + n * 32);
      }
      if (n_valid < 16) std::memset(step + n_valid * 32, 0, static_cast<size_t>(16 - n_valid) * 64);
    }
  });
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
