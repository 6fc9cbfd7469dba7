// kernels: AMX-BF16 GEMM for FP8 / FP4 / BF16 weights at every token count (compiled with -mamx-tile
// -mamx-bf16 -mavx512vbmi and AVX-512 flags; used only when kernels/cpu/isa.cc found AMX and got the tile
// permission).
//
// The WEIGHTS are the A operand (16 rows × 32 K bf16 per tile) and up to 16 tokens the B operand (16 K
// pairs × N token columns), C = 16 rows × N tokens fp32. One TDPBF16PS costs the same whatever N is, so
// per weight byte the work is the in-register decode to bf16 (a few byte shuffles per 64 bytes, written
// to a 4 KB L1 buffer) and a tile load: a decode step of one token costs what one of sixteen costs.
//
// Per 16-row block, K is walked in 128-wide chunks (4 A steps). One token tile: each chunk is decoded and
// multiplied at once (the decoded block never leaves L1). Several token tiles (prefill): the whole block
// is decoded once into `apack`, then each token tile walks the same chunks. Either way every (row, token)
// output sees the same decoded values and the same sequence of tile operations, so its bits depend
// neither on the batch nor on the thread count (a block is computed by one thread).
//
// Scales: FP8's E8M0 scale is one value per (128-row block, 128-K chunk), i.e. per chunk of a tile: the
// chunk's 4 steps accumulate in a fresh C tile whose fp32 sum is folded into the accumulator as
// acc = fma(C, scale, acc) (the spec's Σ_blocks (Σ x·w)·s order). The E4M3 values themselves are exact
// in bf16 (subnormals included: 2^-9 is a normal bf16). FP4's scale is per row and 32 K, so it is folded
// into the decoded bf16 exponent (an integer subtract; exact while the result stays a normal bf16, which
// holds for E8M0 codes in [2, 252]); a block with any other scale takes an exact scalar loop instead.
//
// Where FP4 time goes at one token (512×4096 cache-resident, one core, min of 15 runs): the decode alone
// ~52 µs per MB of packed weights, of which its four 64-byte stores per row and chunk (the A tiles must be
// in memory) take ~29 µs by themselves; the tile loads and TDPBF16PS ~20 µs; each 16-row block's end (the
// first tile store waits for the queued products) ~0.3 µs, ~9 µs per MB at k 4096, twice that at 2048.
// Tile ops and those stores do not overlap on these cores (measured: their times add), so the kernel is
// ~75 µs per MB against ~67 for the vector FP4 tile. Tried for the decode, all within ±4% of the shuffles
// below: VPERMW on the 16-bit words (no masks or unpacks, but it is a port-0 plus a port-5 µop here, and
// the shifts and saturating subtracts are port 0 too), VPERMB with tables repeated 4× (no masks), the
// scale subtrahend precomputed per row. With no scale fold at all the decode would take ~44 µs.
#if defined(__x86_64__)
#include <immintrin.h>

#include <bit>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// NOTE: this file is compiled with AVX-512/AMX flags, so it must not instantiate or emit any inline or
// template code shared with baseline files (std containers, core/formats.h helpers): the linker could
// keep this copy for every caller. Hence the local bf16 rounding and tables, and the caller's scratch.
float round_to_bf16(float f) {
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

// Tiles: 0..3 = C accumulators (16 rows × N tokens fp32), 4 = A (16 rows × 32 bf16), 5 = B (16 pairs × N).
constexpr int kChunkK = 128;                  // K per chunk: 4 A steps, one FP8 scale column
constexpr int64_t kChunkElems = 4 * 16 * 32;  // bf16 per decoded chunk of a 16-row block

// ---- FP8: E4M3 → bf16, exact (subnormals are normal bf16) ----
// Two byte lookups on the code's low 7 bits (VPERMT2B ignores bit 7, the sign) give the bf16's high and
// low bytes of the magnitude; the sign is OR-ed into the high byte. Three shuffle-port µops and one logic
// µop per 64 codes plus the two interleaves (the field arithmetic with a subnormal fix-up it replaced took
// eleven, and the decode is what an AMX FP8 GEMM spends its time on). The interleave leaves word w of
// vector v (0, 1) of each 64-code half holding K = 16·(w/8) + 8·v + w%8 of the half (unpack{lo,hi} work
// per 128-bit lane); kPack.fp8 gathers that order.
constexpr uint16_t e4m3_mag_to_bf16(int c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  float v = e == 0 ? static_cast<float>(m) / 512.0f : (1.0f + static_cast<float>(m) / 8.0f);
  for (int i = 7; i < e; ++i) v *= 2.0f;
  for (int i = e; i < 7 && e != 0; ++i) v *= 0.5f;
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16);
}
struct Fp8Tables {
  alignas(64) uint8_t hi[128];  // by magnitude code 0..127 (0x7F, NaN, is not a valid weight)
  alignas(64) uint8_t lo[128];
};
constexpr Fp8Tables make_fp8_tables() {
  Fp8Tables t{};
  for (int c = 0; c < 128; ++c) {
    const uint16_t b = e4m3_mag_to_bf16(c);
    t.hi[c] = static_cast<uint8_t>(b >> 8);
    t.lo[c] = static_cast<uint8_t>(b & 0xFF);
  }
  return t;
}
constexpr Fp8Tables kFp8 = make_fp8_tables();

// ---- FP4: E2M1 code → bf16 of value·2^kFp4Bias (high / low byte, each table repeated per 128-bit lane) ----
// The bias lifts every value so that the per-row scale is a saturating subtract of (127 + bias − e)·2^7
// from the bf16 bits: zero stays zero (−0 is decoded as +0 for that), a nonzero value loses exactly
// (127 + bias − e) from its exponent field. Exact while 1 ≤ exponent ≤ 254: e ∈ [kFp4MinScale, kFp4MaxScale].
constexpr int kFp4Bias = 125;
constexpr int kFp4MinScale = 2, kFp4MaxScale = 252;
struct Fp4Tables {
  alignas(64) uint8_t hi[64];
  alignas(64) uint8_t lo[64];
};
constexpr Fp4Tables make_fp4_tables() {
  Fp4Tables t{};
  constexpr float kVal[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int n = 0; n < 16; ++n) {
    float v = kVal[n & 7];
    for (int i = 0; i < kFp4Bias; ++i) v *= 2.0f;
    if (n & 8) v = -v;
    uint16_t b = static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16);
    if (n == 8) b = 0;  // −0 → +0 (the saturating subtract would turn 0x8000 into garbage)
    for (int lane = 0; lane < 4; ++lane) {
      t.hi[16 * lane + n] = static_cast<uint8_t>(b >> 8);
      t.lo[16 * lane + n] = static_cast<uint8_t>(b & 0xFF);
    }
  }
  return t;
}
constexpr Fp4Tables kFp4 = make_fp4_tables();

// Activation packing: word indices for vpermt2w. odd_words picks the bf16 (high) half of 32 floats held in
// two zmm. The FP4 decode below leaves word w (0..31) of its vector v (0..3: unpack{lo,hi}(v&1) of the
// {low,high}(v>>1) nibbles) holding K = 32·(w/8) + 16·(v&1) + 2·(w%8) + (v>>1) of the 128-K chunk (lane
// w/8 is 32-K block w/8); fp4_lo[v] gathers that order from two 32-word K groups: words 0..15 of v come
// from groups 0, 1 and words 16..31 from groups 2, 3 with the same in-group offsets.
struct PackTables {
  alignas(64) uint16_t odd_words[32];
  alignas(64) uint16_t fp4_lo[4][32];
  alignas(64) uint16_t fp8[2][32];  // the FP8 decode's order (see kFp8) from a 64-K half's two groups
};
constexpr PackTables make_pack_tables() {
  PackTables t{};
  for (int i = 0; i < 32; ++i) t.odd_words[i] = static_cast<uint16_t>(2 * i + 1);
  for (int v = 0; v < 4; ++v)
    for (int w = 0; w < 32; ++w) {
      const int kk = 32 * ((w / 8) % 2) + 16 * (v & 1) + 2 * (w % 8) + (v >> 1);  // word in the group pair
      t.fp4_lo[v][w] = static_cast<uint16_t>(kk);
    }
  for (int v = 0; v < 2; ++v)
    for (int w = 0; w < 32; ++w) t.fp8[v][w] = static_cast<uint16_t>(16 * (w / 8) + 8 * v + w % 8);
  return t;
}
constexpr PackTables kPack = make_pack_tables();

// Where the weight rows of one call live, and how a 16-row chunk is decoded into A-tile layout
// dst [4 steps][16 rows][32 bf16] (rows past n_valid are left as they are: the caller zeroes them).
// prefetch: bytes from a row to the same row of the next 16-row block, fetched into L2 while this block
// is decoded (rows are a few KB: the hardware prefetcher alone does not reach full speed on them).
// FP8 also pulls the line two chunks on in the same row into L1 (kFp8L1Ahead): in a DRAM-streamed call
// ~40% of the decode's samples sat on the code load's L1 miss (the L2 round trip, or the rest of the
// DRAM one); one thread, 2 MiB pages, 32 MiB per call: m=1 32768x1024 2.94 -> 2.62 ms, 4096x8192 2.55 ->
// 2.32, m=8 3.34 -> 3.10, 2.68 -> 2.51 (min of 2 rounds). Near a row's end it lands in the next row,
// already decoded: a cheap wasted hint.
//
// Rows shorter than a page (FP8 k < 4096: attn.wq_b's 1 KiB rows, the shared w2's 2 KiB) share 4 KiB pages,
// so the per-row L2 prefetch would run several interleaved streams through each page of the next block,
// which the L2 streamer (one forward stream per page, docs/HOWTO-add-kernel.md §7) follows badly. There
// the next block is prefetched page by page instead (`page_lines_log2` = log2 of the lines each 4 KiB
// segment gets per chunk, 8192 / k): every page of it one forward stream, all of them advancing together,
// the same lines as before at the same distance. One thread, 2 MiB pages, MB/s per CPU-second, 3 rounds
// interleaved: m=1 32768x1024 9.6 -> 10.7..11.2 GB/s, 4096x2048 10.2..10.5 -> 10.9..11.2; m=8 8.4..8.6
// -> 9.5..9.7, 8.9..9.5 -> 9.2..9.9. (A single sequential stream through the next block was +12% at m=1
// but -3..-8% at m=8; with rows of a page or more, -15%: at k >= 4096 the per-row streams stay.)
constexpr int64_t kFp8L1Ahead = 2 * kChunkK;
struct Fp8Decoder {
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t k;
  int64_t scale_cols;
  int64_t prefetch;
  int page_lines_log2;  // −1: the per-row L2 prefetch (k ≥ 4096 or not a divisor of 4096)
  int32_t page_offsets[32];

  static Fp8Decoder make(const AmxFp8Job& w) {
    Fp8Decoder d{w.codes, w.scales, w.k, (w.k + 127) / 128, 16 * w.k, -1, {}};
    if (w.k < 4096 && 4096 % w.k == 0) {
      d.page_lines_log2 = std::countr_zero(static_cast<uint64_t>(8192 / w.k));
      const int mask = (1 << d.page_lines_log2) - 1;
      for (int j = 0; j < 32; ++j) d.page_offsets[j] = ((j >> d.page_lines_log2) << 12) + ((j & mask) << 6);
    }
    return d;
  }

  void decode(int64_t row0, int n_valid, int64_t c, uint16_t* dst) const {
    if (page_lines_log2 >= 0) {
      decode_impl<true>(row0, n_valid, c, dst);
    } else {
      decode_impl<false>(row0, n_valid, c, dst);
    }
  }

  template <bool kByPage>
  void decode_impl(int64_t row0, int n_valid, int64_t c, uint16_t* dst) const {
    const __m512i hi0 = _mm512_load_si512(kFp8.hi), hi1 = _mm512_load_si512(kFp8.hi + 64);
    const __m512i lo0 = _mm512_load_si512(kFp8.lo), lo1 = _mm512_load_si512(kFp8.lo + 64);
    const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
    const int64_t base = c * kChunkK, left = k - base;
    // By page: the j-th line prefetched in this chunk (j = 16·h + r) is line c·2^L + j % 2^L of the
    // next block's 4 KiB segment j / 2^L (2^L · 2^(5 − L) = the chunk's 32 lines); page_offsets[j] holds
    // its offset less the chunk's c·2^L lines (a table: the shifts per line cost ~15% of a cache-resident
    // call, the load nothing measurable).
    const char* next = nullptr;
    if constexpr (kByPage) next = reinterpret_cast<const char*>(codes + (row0 + 16) * k) + (c << (page_lines_log2 + 6));
    for (int h = 0; h < 2; ++h) {
      const int64_t valid = left - 64 * h;
      if (valid <= 0) break;
      const __mmask64 m = valid >= 64 ? ~0ull : (1ull << valid) - 1;
      for (int r = 0; r < n_valid; ++r) {
        const uint8_t* src = codes + (row0 + r) * k + base + 64 * h;
        if constexpr (kByPage) {
          _mm_prefetch(next + page_offsets[16 * h + r], _MM_HINT_T1);
        } else {
          _mm_prefetch(reinterpret_cast<const char*>(src + prefetch), _MM_HINT_T1);
        }
        _mm_prefetch(reinterpret_cast<const char*>(src + kFp8L1Ahead), _MM_HINT_T0);
        const __m512i cv = _mm512_maskz_loadu_epi8(m, src);
        __m512i hi = _mm512_permutex2var_epi8(hi0, cv, hi1);
        const __m512i lo = _mm512_permutex2var_epi8(lo0, cv, lo1);
        hi = _mm512_ternarylogic_epi32(hi, cv, sign, 0xF8);  // hi | (code & 0x80)
        uint16_t* d = dst + (2 * h) * 512 + r * 32;
        _mm512_store_si512(d, _mm512_unpacklo_epi8(lo, hi));
        _mm512_store_si512(d + 512, _mm512_unpackhi_epi8(lo, hi));
      }
    }
  }
  float chunk_scale(int64_t row0, int64_t c) const { return kE8m0ToFloat[scales[(row0 / 128) * scale_cols + c]]; }
};

struct Fp4Decoder {
  const uint8_t* packed;
  const uint8_t* scales;
  int64_t k;
  int64_t prefetch;

  void decode(int64_t row0, int n_valid, int64_t c, uint16_t* dst) const {
    const __m512i thi = _mm512_load_si512(kFp4.hi), tlo = _mm512_load_si512(kFp4.lo);
    const __m512i nib = _mm512_set1_epi8(0x0F);
    // Spreads scale byte l of a u32 to the low byte of every word of lane l.
    const __m512i spread = _mm512_set_epi64(
        static_cast<long long>(0x8003800380038003ull), static_cast<long long>(0x8003800380038003ull),
        static_cast<long long>(0x8002800280028002ull), static_cast<long long>(0x8002800280028002ull),
        static_cast<long long>(0x8001800180018001ull), static_cast<long long>(0x8001800180018001ull),
        static_cast<long long>(0x8000800080008000ull), static_cast<long long>(0x8000800080008000ull));
    const __m512i top = _mm512_set1_epi16(static_cast<short>((127 + kFp4Bias) << 7));
    const int64_t half = k / 2, n_sb = k / 32;
    const int64_t steps = (k - c * kChunkK) / 32 < 4 ? (k - c * kChunkK) / 32 : 4;
    const __mmask64 m = steps == 4 ? ~0ull : (1ull << (16 * steps)) - 1;
    for (int r = 0; r < n_valid; ++r) {
      const uint8_t* src = packed + (row0 + r) * half + c * 64;
      _mm_prefetch(reinterpret_cast<const char*>(src + prefetch), _MM_HINT_T1);
      const __m512i cv = _mm512_maskz_loadu_epi8(m, src);
      // The chunk's 4 scale bytes broadcast straight from memory (a load-port µop; through a general register
      // it is one more shuffle-port µop, and the decode is bound on that port).
      __m512i s4;
      if (steps == 4) {
        s4 = _mm512_broadcastd_epi32(_mm_loadu_si32(scales + (row0 + r) * n_sb + 4 * c));
      } else {
        uint32_t t = 0;
        for (int64_t i = 0; i < steps; ++i) t |= static_cast<uint32_t>(scales[(row0 + r) * n_sb + 4 * c + i]) << (8 * i);
        s4 = _mm512_set1_epi32(static_cast<int>(t));
      }
      const __m512i sw = _mm512_shuffle_epi8(s4, spread);
      const __m512i d = _mm512_sub_epi16(top, _mm512_slli_epi16(sw, 7));  // (127 + bias − e) << 7 per lane
      const __m512i lo_n = _mm512_and_si512(cv, nib);
      const __m512i hi_n = _mm512_and_si512(_mm512_srli_epi16(cv, 4), nib);
      const __m512i lh = _mm512_shuffle_epi8(thi, lo_n), ll = _mm512_shuffle_epi8(tlo, lo_n);
      const __m512i hh = _mm512_shuffle_epi8(thi, hi_n), hl = _mm512_shuffle_epi8(tlo, hi_n);
      uint16_t* dr = dst + r * 32;
      _mm512_store_si512(dr, _mm512_subs_epu16(_mm512_unpacklo_epi8(ll, lh), d));
      _mm512_store_si512(dr + 512, _mm512_subs_epu16(_mm512_unpackhi_epi8(ll, lh), d));
      _mm512_store_si512(dr + 1024, _mm512_subs_epu16(_mm512_unpacklo_epi8(hl, hh), d));
      _mm512_store_si512(dr + 1536, _mm512_subs_epu16(_mm512_unpackhi_epi8(hl, hh), d));
    }
  }
  // True when every scale of rows [row0, row0 + n_valid) lets the exponent fold stay exact.
  bool scales_foldable(int64_t row0, int n_valid) const {
    const uint8_t* s = scales + row0 * (k / 32);
    const int64_t n = n_valid * (k / 32);
    __m512i lo = _mm512_set1_epi8(static_cast<char>(0xFF)), hi = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 64) {
      const __mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
      const __m512i v = _mm512_maskz_loadu_epi8(m, s + i);
      lo = _mm512_mask_min_epu8(lo, m, lo, v);
      hi = _mm512_max_epu8(hi, v);
    }
    return (_mm512_cmplt_epu8_mask(lo, _mm512_set1_epi8(kFp4MinScale)) |
            _mm512_cmpgt_epu8_mask(hi, _mm512_set1_epi8(static_cast<char>(kFp4MaxScale)))) == 0;
  }
};

struct Bf16Decoder {
  const uint16_t* w;
  int64_t k;
  int64_t prefetch;

  void decode(int64_t row0, int n_valid, int64_t c, uint16_t* dst) const {
    const int64_t left = k - c * kChunkK;
    for (int r = 0; r < n_valid; ++r) {
      const uint16_t* src = w + (row0 + r) * k + c * kChunkK;
      const char* pf = reinterpret_cast<const char*>(src) + prefetch;
      for (int line = 0; line < 4; ++line) _mm_prefetch(pf + 64 * line, _MM_HINT_T1);
      for (int s = 0; s < 4 && 32 * s < left; ++s)
        _mm512_store_si512(dst + s * 512 + r * 32, _mm512_loadu_si512(src + 32 * s));
    }
  }
  // The prefetch of decode() alone, for blocks the tiles load in place.
  void prefetch_chunk(int64_t row0, int64_t c) const {
    for (int r = 0; r < 16; ++r) {
      const char* pf = reinterpret_cast<const char*>(w + (row0 + r) * k + c * kChunkK) + prefetch;
      for (int line = 0; line < 4; ++line) _mm_prefetch(pf + 64 * line, _MM_HINT_T1);
    }
  }
};

struct Ctx {
  int64_t n_rows, k, n_tokens;
  int n_cols;  // tokens per B / C tile: min(n_tokens, 16)
  const uint32_t* xpack;
  float* out;  // out[t·ldo + (row − r0)]
  int64_t ldo, r0;
  bool round_bf16;
  int64_t chunks() const { return (k + kChunkK - 1) / kChunkK; }
  int chunk_steps(int64_t c) const {
    const int64_t s = (k - c * kChunkK + 31) / 32;
    return static_cast<int>(s < 4 ? s : 4);
  }
  // FP8 decodes 64-code halves into two steps each (K interleaved across them).
  int fp8_chunk_steps(int64_t c) const {
    const int64_t s = 2 * ((k - c * kChunkK + 63) / 64);
    return static_cast<int>(s < 4 ? s : 4);
  }
  // Token tile tt's B operand for step s: [16 pairs][n_cols] u32.
  const uint32_t* b_step(int64_t tt, int64_t s) const { return xpack + (tt * 4 * chunks() + s) * 16 * n_cols; }
};

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_x16

// acc: [16 rows][n_cols] fp32, packed. Token t's 16 row sums are one vector (a gather of column t at
// several tokens), stored masked to n_valid rows: at 8 tokens on 1 KiB rows the scalar loop this replaced
// (a bf16 rounding and a store per element) took ~12% of a cache-resident call.
void write_out_packed(const Ctx& cx, const float* acc, int64_t row0, int n_valid, int64_t tt) {
  const __mmask16 rows = static_cast<__mmask16>((1u << n_valid) - 1);
  if (cx.n_cols == 1) {  // one token: the 16 rows' sums are one vector
    const __m512 v = _mm512_load_ps(acc);
    _mm512_mask_storeu_ps(cx.out + (row0 - cx.r0), rows, cx.round_bf16 ? round_bf16_x16(v) : v);
    return;
  }
  const int64_t t_base = tt * 16, t_end = cx.n_tokens - t_base < 16 ? cx.n_tokens - t_base : 16;
  __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                  _mm512_set1_epi32(cx.n_cols));  // row n of column t: n·n_cols + t
  for (int64_t t = 0; t < t_end; ++t) {
    const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), rows, at, acc, 4);
    _mm512_mask_storeu_ps(cx.out + (t_base + t) * cx.ldo + (row0 - cx.r0), rows, cx.round_bf16 ? round_bf16_x16(v) : v);
    at = _mm512_add_epi32(at, _mm512_set1_epi32(1));
  }
}

// One TDPBF16PS into an accumulator the previous one wrote waits for it (~3 products' time), so the
// products are spread over four accumulator tiles C0..C3 (tile j = accumulator j, by compile-time index).
inline void dp_into(int j, const uint16_t* a, const uint32_t* b, int b_stride, int a_stride = 64) {
  _tile_loadd(4, a, a_stride);
  _tile_loadd(5, b, b_stride);
  switch (j) {
    case 0:
      _tile_dpbf16ps(0, 4, 5);
      break;
    case 1:
      _tile_dpbf16ps(1, 4, 5);
      break;
    case 2:
      _tile_dpbf16ps(2, 4, 5);
      break;
    default:
      _tile_dpbf16ps(3, 4, 5);
      break;
  }
}

inline void zero_accumulators() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

void zero_rows(uint16_t* chunk, int n_valid) {
  if (n_valid >= 16) return;
  for (int s = 0; s < 4; ++s) std::memset(chunk + s * 512 + n_valid * 32, 0, static_cast<size_t>(16 - n_valid) * 64);
}

void configure(int n_cols) {
  const int colsb[6] = {4 * n_cols, 4 * n_cols, 4 * n_cols, 4 * n_cols, 64, 4 * n_cols};
  amx_configure_tiles_cols(6, colsb);
}

// FP4 / BF16 block: step s of every chunk accumulates into C(s), and the block's sum is
// (C0 + C1) + (C2 + C3). FP4 always runs a chunk's 4 steps (each holds K from all four 32-K blocks of the
// chunk; a tail chunk's missing blocks are zeros). With one token tile, chunk c + 1 is decoded before
// chunk c's tile loads are issued, so the loads do not wait for the decode's stores to drain.
template <typename Decoder>
void block_continuous(const Ctx& cx, const Decoder& dec, int64_t row0, int n_valid, uint16_t* apack,
                      float (*cb)[16][16]) {
  const int64_t chunks = cx.chunks(), tiles = (cx.n_tokens + 15) / 16;
  const int stride = 4 * cx.n_cols;
  constexpr bool kFp4Steps = std::is_same_v<Decoder, Fp4Decoder>;
  // The accumulators are stored packed ([16 rows][n_cols], at the tile's width): n_cols vectors per tile to
  // sum instead of 16 rows of 64 bytes of which n_cols columns are live (one vector at m = 1).
  auto finish = [&](int64_t tt) {
    float* p = &cb[0][0][0];
    const int nv = cx.n_cols, ps = 16 * nv;
    _tile_stored(0, p, stride);
    _tile_stored(1, p + ps, stride);
    _tile_stored(2, p + 2 * ps, stride);
    _tile_stored(3, p + 3 * ps, stride);
    for (int v = 0; v < nv; ++v)
      _mm512_store_ps(p + 16 * v, _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(p + 16 * v), _mm512_load_ps(p + ps + 16 * v)),
                                                _mm512_add_ps(_mm512_load_ps(p + 2 * ps + 16 * v),
                                                              _mm512_load_ps(p + 3 * ps + 16 * v))));
    write_out_packed(cx, p, row0, n_valid, tt);
  };
  auto run_chunk = [&](const uint16_t* a, int64_t tt, int64_t c) {
    const int steps = kFp4Steps ? 4 : cx.chunk_steps(c);
    for (int st = 0; st < steps; ++st) dp_into(st, a + st * 512, cx.b_step(tt, 4 * c + st), stride);
  };
  if constexpr (std::is_same_v<Decoder, Bf16Decoder>) {
    // A full block of BF16 rows is already in A-tile form: tile loads read the weight rows in place.
    if (n_valid == 16) {
      const int a_stride = static_cast<int>(2 * cx.k);
      for (int64_t tt = 0; tt < tiles; ++tt) {
        zero_accumulators();
        for (int64_t c = 0; c < chunks; ++c) {
          const uint16_t* a = dec.w + row0 * cx.k + c * kChunkK;
          if (tt == 0) dec.prefetch_chunk(row0, c);
          for (int st = 0; st < cx.chunk_steps(c); ++st) dp_into(st, a + st * 32, cx.b_step(tt, 4 * c + st), stride, a_stride);
        }
        finish(tt);
      }
      return;
    }
  }
  if (tiles == 1) {
    zero_accumulators();
    zero_rows(apack, n_valid);
    zero_rows(apack + kChunkElems, n_valid);
    dec.decode(row0, n_valid, 0, apack);
    for (int64_t c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) dec.decode(row0, n_valid, c + 1, apack + ((c + 1) & 1) * kChunkElems);
      run_chunk(apack + (c & 1) * kChunkElems, 0, c);
    }
    finish(0);
    return;
  }
  for (int64_t c = 0; c < chunks; ++c) {
    zero_rows(apack + c * kChunkElems, n_valid);
    dec.decode(row0, n_valid, c, apack + c * kChunkElems);
  }
  for (int64_t tt = 0; tt < tiles; ++tt) {
    zero_accumulators();
    for (int64_t c = 0; c < chunks; ++c) run_chunk(apack + c * kChunkElems, tt, c);
    finish(tt);
  }
}

// FP8 block: chunk c's steps accumulate in a fresh C(c % 2), folded as acc = fma(C, scale_c, acc) in chunk
// order; the fold of chunk c is issued after chunk c + 1's products, so its tile store does not wait on
// the products just issued. With one token tile the decode runs a chunk ahead of the tile loads: chunk c's
// products and chunk c − 1's fold are issued first, then chunk c + 1 is decoded (into the slot chunk c − 1's
// tile loads have read), so the tile loads follow the stores of a decode issued an iteration earlier. The
// order only moves the decode: DRAM-streamed, one thread, 2 MiB pages, GB per CPU-second, 6 rounds
// interleaved against decoding before the products, most cases +2..5% (m=1 256x4096 11.1..11.9 ->
// 11.8..12.55, 32768x1024 12.1..12.6 -> 12.5..13.4; m=8 32768x1024 9.7..10.8 -> 10.8..11.6), 4096x8192
// within the noise; cache-resident within the noise.
void block_fp8(const Ctx& cx, const Fp8Decoder& dec, int64_t row0, int n_valid, uint16_t* apack, float* acc,
               float* cb) {
  const int64_t chunks = cx.chunks(), tiles = (cx.n_tokens + 15) / 16;
  const int stride = 4 * cx.n_cols;
  // C tiles are stored packed, [16 rows][n_cols] (row stride = the tile's width), so the fold touches
  // n_cols vectors: one at m = 1 rather than sixteen 64-byte rows of which one column is live.
  const int nv = cx.n_cols;
  auto fold = [&](int64_t c) {
    float* cp = cb + (c & 1) * 256;
    if (c & 1) {
      _tile_stored(1, cp, stride);
    } else {
      _tile_stored(0, cp, stride);
    }
    const __m512 s = _mm512_set1_ps(dec.chunk_scale(row0, c));
    for (int v = 0; v < nv; ++v)
      _mm512_store_ps(acc + 16 * v, _mm512_fmadd_ps(_mm512_load_ps(cp + 16 * v), s, _mm512_load_ps(acc + 16 * v)));
  };
  auto run = [&](int64_t tt, auto chunk_ptr, bool decode) {
    for (int v = 0; v < nv; ++v) _mm512_store_ps(acc + 16 * v, _mm512_setzero_ps());
    if (decode) {
      zero_rows(chunk_ptr(0), n_valid);
      zero_rows(chunk_ptr(1), n_valid);
      dec.decode(row0, n_valid, 0, chunk_ptr(0));
    }
    for (int64_t c = 0; c < chunks; ++c) {
      const uint16_t* a = chunk_ptr(c);
      if (c & 1) {
        _tile_zero(1);
      } else {
        _tile_zero(0);
      }
      for (int st = 0; st < cx.fp8_chunk_steps(c); ++st)
        dp_into(static_cast<int>(c & 1), a + st * 512, cx.b_step(tt, 4 * c + st), stride);
      if (c > 0) fold(c - 1);
      if (decode && c + 1 < chunks) dec.decode(row0, n_valid, c + 1, chunk_ptr(c + 1));
    }
    fold(chunks - 1);
    write_out_packed(cx, acc, row0, n_valid, tt);
  };
  if (tiles == 1) {
    run(0, [&](int64_t c) { return apack + (c & 1) * kChunkElems; }, true);
    return;
  }
  for (int64_t c = 0; c < chunks; ++c) {
    zero_rows(apack + c * kChunkElems, n_valid);
    dec.decode(row0, n_valid, c, apack + c * kChunkElems);
  }
  for (int64_t tt = 0; tt < tiles; ++tt) run(tt, [&](int64_t c) { return apack + c * kChunkElems; }, false);
}

// The exact fallback for an FP4 block whose scales cannot be folded into bf16: fp32 FMAs in K order on
// the original activations (per (row, token), independent of the batch).
void block_fp4_exact(const Ctx& cx, const AmxFp4Job& w, const float* x, int64_t ldx, int64_t row0, int n_valid) {
  constexpr float kE2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int64_t t = 0; t < cx.n_tokens; ++t) {
    float* o = cx.out + t * cx.ldo + (row0 - cx.r0);
    for (int n = 0; n < n_valid; ++n) {
      const uint8_t* p = w.packed + (row0 + n) * (w.k / 2);
      const uint8_t* s = w.scales + (row0 + n) * (w.k / 32);
      float acc = 0.0f;
      for (int64_t i = 0; i < w.k; ++i) {
        const uint8_t code = (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 0xF;
        acc = __builtin_fmaf(x[t * ldx + i], kE2m1[code] * kE8m0ToFloat[s[i / 32]], acc);
      }
      o[n] = cx.round_bf16 ? round_to_bf16(acc) : acc;
    }
  }
}

struct alignas(64) Acc {
  float acc[16][16] = {};
  float cb[4][16][16] = {};  // accumulator tiles; columns past the tile width stay zero
};

Ctx make_ctx(int64_t n_rows, int64_t k, const AmxRowsArgs& a) {
  return Ctx{n_rows, k, a.n_tokens, static_cast<int>(a.n_tokens < 16 ? a.n_tokens : 16), a.xpack, a.out, a.ldo,
             a.r0, a.round_bf16};
}

// The 4 steps' B vectors (16 pairs, u32) of chunk c for one token's activations xr[0, k) in `order`;
// low_bits collects the activations' low 16 bits (the bf16-exactness check).
void pack_chunk(AmxKOrder order, const float* xr, int64_t k, int64_t c, __m512i& low_bits, __m512i* steps) {
  const __m512i odd = _mm512_load_si512(kPack.odd_words);
  // The chunk's 128 activations as bf16 words in K order (zeros past k): w[j] = K 32j .. 32j + 31.
  __m512i w[4];
  for (int j = 0; j < 4; ++j) {
    __m512i v[2];
    for (int h = 0; h < 2; ++h) {
      const int64_t at = c * kChunkK + 32 * j + 16 * h, left = k - at;
      const __mmask16 m = left >= 16 ? 0xFFFF : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
      v[h] = _mm512_maskz_loadu_epi32(m, xr + (left > 0 ? at : 0));
      low_bits = _mm512_or_si512(low_bits, v[h]);
    }
    w[j] = _mm512_permutex2var_epi16(v[0], odd, v[1]);
  }
  for (int s = 0; s < 4; ++s) {
    __m512i pairs = w[s];
    if (order == AmxKOrder::kFp8) {
      pairs = _mm512_permutex2var_epi16(w[s & 2], _mm512_load_si512(kPack.fp8[s & 1]), w[(s & 2) + 1]);
    } else if (order == AmxKOrder::kFp4) {
      const __m512i lo = _mm512_permutex2var_epi16(w[0], _mm512_load_si512(kPack.fp4_lo[s]), w[1]);
      const __m512i hi = _mm512_permutex2var_epi16(w[2], _mm512_load_si512(kPack.fp4_lo[s]), w[3]);
      pairs = _mm512_mask_blend_epi32(0xFF00, lo, hi);
    }
    steps[s] = pairs;
  }
}

}  // namespace

int64_t amx_packed_x_words(int64_t n_tokens, int64_t k) {
  const int64_t n_cols = n_tokens < 16 ? n_tokens : 16;
  return ((n_tokens + 15) / 16) * 4 * ((k + kChunkK - 1) / kChunkK) * 16 * n_cols;
}

int64_t amx_apack_elems(int64_t k) {
  const int64_t chunks = (k + kChunkK - 1) / kChunkK;
  return kChunkElems * (chunks < 2 ? 2 : chunks);  // one token tile: a ring of two; more: the whole block
}

bool amx_pack_x(AmxKOrder order, const float* x, int64_t ldx, int64_t n_tokens, int64_t k, uint32_t* out) {
  const int64_t chunks = (k + kChunkK - 1) / kChunkK;
  const int n_cols = static_cast<int>(n_tokens < 16 ? n_tokens : 16);
  const int64_t tile_words = 4 * chunks * 16 * n_cols;
  __m512i low_bits = _mm512_setzero_si512();
  __m512i steps[4];
  if (n_cols == 1) {  // one token: a step's B is its 16 pairs
    for (int64_t c = 0; c < chunks; ++c) {
      pack_chunk(order, x, k, c, low_bits, steps);
      for (int s = 0; s < 4; ++s) _mm512_storeu_si512(out + (4 * c + s) * 16, steps[s]);
    }
  } else {
    // Several tokens: each chunk's step vectors of the tile's tokens go to tok [4 steps][16 tokens][16
    // pairs]; a step's B, [16 pairs][n_cols], is then n_cols vectors, element e = (pair e / n_cols, token
    // e % n_cols), each one gather from tok (the per-token scatter this replaced stored element by
    // element: ~30% of a cache-resident 8-token call at k = 8192). Absent tokens of a last partial tile
    // are zero columns.
    alignas(64) uint32_t tok[4][16][16];
    __m512i from[16];  // word of tok[s] for element 16j + lane of the step: token·16 + pair
    for (int j = 0; j < n_cols; ++j) {
      const __m512i e = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(16 * j));
      alignas(64) int32_t ev[16], idx[16];
      _mm512_store_si512(ev, e);
      for (int l = 0; l < 16; ++l) idx[l] = (ev[l] % n_cols) * 16 + ev[l] / n_cols;
      from[j] = _mm512_load_si512(idx);
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 16) {
      const int64_t in_tile = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
      if (in_tile < n_cols) std::memset(tok, 0, sizeof(tok));
      uint32_t* tile = out + (t0 / 16) * tile_words;
      for (int64_t c = 0; c < chunks; ++c) {
        for (int64_t t = 0; t < in_tile; ++t) {
          pack_chunk(order, x + (t0 + t) * ldx, k, c, low_bits, steps);
          for (int s = 0; s < 4; ++s) _mm512_store_si512(tok[s][t], steps[s]);
        }
        for (int s = 0; s < 4; ++s) {
          uint32_t* dst = tile + (4 * c + s) * 16 * n_cols;
          for (int j = 0; j < n_cols; ++j)
            _mm512_storeu_si512(dst + 16 * j, _mm512_i32gather_epi32(from[j], tok[s][0], 4));
        }
      }
    }
  }
  // Every activation must be exact in bf16 (its low 16 bits zero).
  return _mm512_test_epi32_mask(low_bits, _mm512_set1_epi32(0xFFFF)) == 0;
}

void fp4_gemm_amx_rows(const AmxFp4Job& w, const AmxRowsArgs& a) {
  const Ctx cx = make_ctx(w.n_rows, w.k, a);
  const Fp4Decoder dec{w.packed, w.scales, w.k, 16 * (w.k / 2)};
  Acc st;
  configure(cx.n_cols);
  for (int64_t nb = a.r0; nb < a.r1; nb += 16) {
    const int n_valid = static_cast<int>(a.r1 - nb < 16 ? a.r1 - nb : 16);
    if (dec.scales_foldable(nb, n_valid)) {
      block_continuous(cx, dec, nb, n_valid, a.apack, st.cb);
    } else {
      block_fp4_exact(cx, w, a.x, a.ldx, nb, n_valid);
    }
  }
  _tile_release();
}

void fp8_gemm_amx_rows(const AmxFp8Job& w, const AmxRowsArgs& a) {
  const Ctx cx = make_ctx(w.n_rows, w.k, a);
  const Fp8Decoder dec = Fp8Decoder::make(w);
  Acc st;
  configure(cx.n_cols);
  for (int64_t nb = a.r0; nb < a.r1; nb += 16) {
    const int n_valid = static_cast<int>(a.r1 - nb < 16 ? a.r1 - nb : 16);
    block_fp8(cx, dec, nb, n_valid, a.apack, &st.acc[0][0], &st.cb[0][0][0]);
  }
  _tile_release();
}

void bf16_gemm_amx_rows(const uint16_t* w, int64_t n_rows, int64_t k, const AmxRowsArgs& a) {
  const Ctx cx = make_ctx(n_rows, k, a);
  const Bf16Decoder dec{w, k, 16 * 2 * k};
  Acc st;
  configure(cx.n_cols);
  for (int64_t nb = a.r0; nb < a.r1; nb += 16) {
    const int n_valid = static_cast<int>(a.r1 - nb < 16 ? a.r1 - nb : 16);
    block_continuous(cx, dec, nb, n_valid, a.apack, st.cb);
  }
  _tile_release();
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
