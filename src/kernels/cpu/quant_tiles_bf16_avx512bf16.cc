// kernels: the BF16-weight tile on VDPBF16PS (Isa::kAvx512Bf16: AVX512_BF16 CPUs without AMX, e.g. Zen 4/5;
// compiled with the AVX-512 flags plus -mavx512bf16, called only after runtime detection). bf16 weight
// pairs are adjacent in a row already, so a 64-byte load of 32 weights is a VDPBF16PS operand as it is: no
// decode at all, and one instruction does 32 products where the fp32 tile's FMA does 16 after a widen and
// a shift. The activations come packed to bf16 once per call (Bf16Tile::xb, exact: bf16_gemm checks it).
//
// The fp32 order of one (row, token) sum, the same for every tile width and row grouping:
//   16 lanes; lane l, for each 32-column step s in order: acc_l = (acc_l + w[32s+2l+1]·x[32s+2l+1])
//   + w[32s+2l]·x[32s+2l] (columns past k are 0), each addition rounded to fp32 (VDPBF16PS's documented
//   pseudocode, the odd pair first; measured bit-exactly on Zen 5); then the lanes are added as a tree:
//   l + (l+8), then + (l+4), then + (l+2), then + (l+1) (reduce16_avx512.inc).
// Products of two bf16 are exact in fp32, so that chain is a plain fp32 sum, except that VDPBF16PS treats
// denormal inputs as 0 and flushes denormal results (DAZ, FTZ). The guard keeps both from acting: every
// nonzero |activation| and |weight| ≥ 2^-56, so every product is a multiple of 2^-126 and so is every
// partial sum (an exact sum of such multiples that fp32 rounds stays one), whose nonzero values are then
// ≥ 2^-126: normal. Tokens are checked once per call (bf16_gemm: x_ok), weight rows in the tile on the
// bytes it loads anyway, unless the caller knows them (Bf16Matrix::row_ok, found once at model load: the
// check is 3 ALU uops per row per 64 bytes, and at one token on Zen 5 it cost the head's stream a third);
// a (row, token) pair outside the guard takes the AVX-512 fp32 tile's sum instead. Both decisions are per
// row and per token, so a row's result never depends on what else shares its tile or call (batch
// invariance).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// One 32-column step of R rows × T tokens. kCheck: fold the weights' (magnitude − 1) into wmin (unsigned
// 16-bit min; a zero weight wraps to 0xFFFF and never fails), 3 ALU uops per row on pipes the dot products
// leave free.
template <int R, int T, bool kMasked, bool kCheck>
inline void dp_step(const Bf16Tile& t, const uint16_t* const* w, const uint16_t* xb, int64_t k, __mmask32 m, __m512 (&acc)[R][T],
                    __m512i (&wmin)[R]) {
  __m512i wv[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    wv[r] = kMasked ? _mm512_maskz_loadu_epi16(m, w[r] + k) : _mm512_loadu_si512(w[r] + k);
    if constexpr (kCheck)
      wmin[r] = _mm512_min_epu16(
          wmin[r], _mm512_sub_epi16(_mm512_and_si512(wv[r], _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(1)));
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    // 64-byte aligned and zero past k (bf16_gemm's packing): a plain load even on the masked step.
    __m512i xv = _mm512_load_si512(xb + j * t.ldxb + k);
    // NOTE: keeps xv in a register: GCC would otherwise fold the load into every row's VDPBF16PS.
    asm("" : "+v"(xv));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r][j] = _mm512_dpbf16_ps(acc[r][j], reinterpret_cast<__m512bh&>(wv[r]), reinterpret_cast<__m512bh&>(xv));
  }
}

#include "kernels/cpu/reduce16_avx512.inc"  // reduce16, reduce16_x16: the lane tree of the order above

// Columns are taken in chunks of kKChunk, the lane accumulators waiting in memory between chunks (the same
// chain per (row, token), so the same sums). Tried: 512-column chunks, so that 8 tokens' packed activation
// slices (8 KiB) stay in L1 for every pass of the tile instead of 64 KiB per 4096-column row: slower here
// (128x4096, 8 tokens, one core: 53 µs per call against 47-50 µs unchunked). Kept as one chunk up to the
// head's 4096 columns.
constexpr int64_t kKChunk = 4096;

// Per-pass accumulators and guard minima, kept across the column chunks.
template <int R>
struct DpState {
  __m512 acc[R][kTileTokens];
  __m512i wmin[R];
};

// Rows [r0, r0 + PR) × tokens [j0, j0 + T) over columns [kb, ke) (ke = k or a multiple of 32).
// kCheck: also fold those rows' weights into the guard minima (one pass per row does).
template <int R, int PR, int T, bool kCheck>
inline void dp_pass(const Bf16Tile& t, int r0, int j0, int64_t kb, int64_t ke, DpState<R>& st) {
  const uint16_t* const* w = t.w + r0;
  __m512i wmin[PR];
  __m512 acc[PR][T];
#pragma GCC unroll 4
  for (int r = 0; r < PR; ++r) {
    wmin[r] = st.wmin[r0 + r];
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = st.acc[r0 + r][j0 + j];
  }
  const uint16_t* xb = t.xb + j0 * t.ldxb;
  const int64_t full = ke & ~int64_t{31};
  int64_t k = kb;
  for (; k < full; k += 32) {
#pragma GCC unroll 4
    for (int r = 0; r < PR; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + k) + t.prefetch, _MM_HINT_T0);
    dp_step<PR, T, false, kCheck>(t, w, xb, k, 0, acc, wmin);
  }
  if (k < ke) {
#pragma GCC unroll 4
    for (int r = 0; r < PR; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + k) + t.prefetch, _MM_HINT_T0);
    dp_step<PR, T, true, kCheck>(t, w, xb, k, static_cast<__mmask32>((uint64_t{1} << (ke - k)) - 1u), acc, wmin);
  }
#pragma GCC unroll 4
  for (int r = 0; r < PR; ++r) {
    st.wmin[r0 + r] = wmin[r];
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) st.acc[r0 + r][j0 + j] = acc[r][j];
  }
}

// Passes of up to 4 rows × 4 tokens (16 accumulators, 4 weights, 4 guard minima and the activation fit
// the 32 registers; 6 tokens as in the fp32 tile would need 33); 8 tokens as two such passes. That reads
// each weight twice (the second time from L1 / L2) where 2 rows × 8 tokens twice read it once, but each
// activation vector serves 4 rows instead of 2: at 4096 columns 8 tokens' activations (64 KiB) overflow
// L1, so that halves the L2 traffic that bounds the tile. Zen 5, 8 tokens, the head's shape from a 1 GiB
// working set on 2 threads (wall GB/s, medians of 10 passes, two runs): 16.0-16.2 -> 19.4-19.7; one core
// from cache (dsv4_bench bf16_gemm/avx512bf16/m=8/128x4096): 45.6-45.8 -> 40.2-42.7 us, m=16 101-103 -> 90-91.
// kCheck: the first pass over each row also folds its weights into the guard minima (false when the
// caller knows every row's guard: Bf16Tile::w_ok).
template <int R, bool kCheck>
void dp_chunk(const Bf16Tile& t, int64_t kb, int64_t ke, DpState<R>& st) {
  switch (t.n_tokens) {
    case 1: return dp_pass<R, R, 1, kCheck>(t, 0, 0, kb, ke, st);
    case 2: return dp_pass<R, R, 2, kCheck>(t, 0, 0, kb, ke, st);
    case 3: return dp_pass<R, R, 3, kCheck>(t, 0, 0, kb, ke, st);
    case 4: return dp_pass<R, R, 4, kCheck>(t, 0, 0, kb, ke, st);
    case 5:
      dp_pass<R, R, 3, kCheck>(t, 0, 0, kb, ke, st);
      return dp_pass<R, R, 2, false>(t, 0, 3, kb, ke, st);
    case 6:
      dp_pass<R, R, 3, kCheck>(t, 0, 0, kb, ke, st);
      return dp_pass<R, R, 3, false>(t, 0, 3, kb, ke, st);
    case 7:
      dp_pass<R, R, 4, kCheck>(t, 0, 0, kb, ke, st);
      return dp_pass<R, R, 3, false>(t, 0, 4, kb, ke, st);
    default:
      dp_pass<R, R, 4, kCheck>(t, 0, 0, kb, ke, st);
      return dp_pass<R, R, 4, false>(t, 0, 4, kb, ke, st);
  }
}

template <int R>
void dp_rows(Bf16Tile& t) {
  DpState<R> st;
  for (int r = 0; r < R; ++r) {
    st.wmin[r] = _mm512_set1_epi16(-1);
    for (int j = 0; j < kTileTokens; ++j) st.acc[r][j] = _mm512_setzero_ps();
  }
  bool known = true;  // every row's guard given by the caller: no check in the loop
  for (int r = 0; r < R; ++r) known &= t.w_ok[r] >= 0;
  for (int64_t kb = 0; kb < t.k; kb += kKChunk) {
    const int64_t ke = std::min(t.k, kb + kKChunk);
    if (known) {
      dp_chunk<R, false>(t, kb, ke, st);
    } else {
      dp_chunk<R, true>(t, kb, ke, st);
    }
  }
  if (t.n_tokens >= 4) {
    // Two rows' 8 token slots per transposed tree (the same sums; slots past n_tokens are +0 and rows past R
    // read zeros, their results unused).
    static_assert(kTileTokens == 8 && kBf16TileRows % 2 == 0, "a tree covers two rows' token slots");
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 2) {
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) v[i] = r + i / 8 < R ? st.acc[r + i / 8][i % 8] : _mm512_setzero_ps();
      _mm512_storeu_ps(&t.sums[r][0], reduce16_x16(v));
    }
  } else {
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = reduce16(st.acc[r][j]);
  }
  const __m512i* wmin = st.wmin;
  bool rows_ok[R];
  bool all_ok = true;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    rows_ok[r] = known ? t.w_ok[r] != 0
                       : _mm512_cmplt_epu16_mask(
                             wmin[r], _mm512_set1_epi16(static_cast<short>(kBf16GuardMinMagnitude - 1))) == 0;
    all_ok &= rows_ok[r];
  }
  for (int j = 0; j < t.n_tokens; ++j) all_ok &= t.x_ok[j] != 0;
  if (all_ok) return;
  // Outside the guard: those (row, token) sums come from the fp32 tile (its own fixed order).
  Bf16Tile f = t;
  bf16_tile_avx512(f);
  bool row_refused = false;
  for (int r = 0; r < R; ++r) {
    row_refused |= !rows_ok[r];
    for (int j = 0; j < t.n_tokens; ++j)
      if (!rows_ok[r] || t.x_ok[j] == 0) t.sums[r][j] = f.sums[r][j];
  }
  if (row_refused) note_bf16_refusal();  // tokens are counted once per call by bf16_gemm
}

}  // namespace

// 16 floats per step: bf16-exact (low halves zero), nonzero magnitudes ≥ 2^-56, and the high halves out.
int64_t bf16_pack_x(const float* x, int64_t n_tokens, int64_t k, uint16_t* out, uint8_t* ok) {
  const int64_t ld = bf16_x_stride(k);
  const __m512i low = _mm512_set1_epi32(0xFFFF), abs = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i tiny = _mm512_set1_epi32((71 << 23) - 1);  // (magnitude − 1) below this: nonzero, < 2^-56
  int64_t n_ok = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * k;
    uint16_t* o = out + t * ld;
    __mmask16 bad = 0;
    for (int64_t i = 0; i < ld; i += 16) {
      const __mmask16 m = i + 16 <= k ? static_cast<__mmask16>(0xFFFF)
                          : i < k     ? static_cast<__mmask16>((1u << (k - i)) - 1u)
                                      : static_cast<__mmask16>(0);
      const __m512i v = _mm512_maskz_loadu_epi32(m, xt + i);
      bad |= _mm512_test_epi32_mask(v, low);
      bad |= _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_and_si512(v, abs), _mm512_set1_epi32(1)), tiny);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
    }
    ok[t] = static_cast<uint8_t>(bad == 0);
    n_ok += ok[t];
  }
  return n_ok;
}

void bf16_tile_avx512bf16(Bf16Tile& t) {
  switch (t.n_rows) {
    case 1: return dp_rows<1>(t);
    case 2: return dp_rows<2>(t);
    case 3: return dp_rows<3>(t);
    default: return dp_rows<4>(t);
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
