// kernels: the lightning-indexer scores of packed keys on AVX512_VNNI integer dot products (VPDPBUSD), the
// indexer of the AVX-512 tiers on CPUs that have VNNI and VBMI (isa.h has_avx512_vnni_vbmi).
//
// Why integers, and why one integer per dot: the indexer's q and keys are FP4-simulated (spec §2.6: E2M1 ×
// a power of two per 32-block), so each 32-block is I · 2^E with small integers I (packed keys: I = 2·E2M1,
// |I| ≤ 12; q through indexer_vector_to_ints_avx2, |I| ≤ 15). After a Hadamard rotation a vector's blocks
// have nearly the same scale, so each vector is taken as I · 2^shift · 2^E_min with shift = E − E_min ≤ 3 per
// block: still bytes (|q| ≤ 120, key + 96 in 0..192), and the whole q_h·k_t is then ONE exact integer
// (|·| ≤ 128·120·96 < 2^24) times 2^(E_min,q + E_min,k): exact in fp32, so every score is the reference's
// (double dots) bit for bit, with no per-block fold (the AVX2 path sums four scaled block dots in fp32).
// VPDPBUSD multiplies 4 unsigned by 4 signed bytes and adds the four products to a 32-bit lane: 64
// products per zmm instruction, one per cycle on Zen 4 and two on Zen 5 (latency 4), and nothing else in the
// loop competes for its pipes but the two multiplies per (head, 16 keys) of the scale and head weight. The key
// is the unsigned side (+ 96), q the signed one, broadcast one dword at a time; each head's accumulator starts
// at −96 · Σ q, which cancels the offset. Every later step is the reference's, on 16 keys in lanes.
//
// Keys go 16 to a group: per block b and step s (4 elements) one vector whose lane j holds key j's elements
// 32b + 4s .. 32b + 4s + 3 as bytes, built from the packed codes with no fp32 detour: per block a 16 × 4
// dword transpose (four keys per vector by 128-bit inserts, then in-lane unpacks), then per step one
// VPMULTISHIFTQB (each byte takes its element's nibble), one VPTERNLOGD (nibble | the lane's shift in bits
// 4-5) and one VPERMB (64-entry table: 16·shift + code → 2·E2M1 · 2^shift + 96).
//
// Fallbacks, each keeping a value's result independent of its neighbours: a q not of that form (a block
// not I · 2^E, nonzero blocks more than 3 binades apart, head_dim > 512, more than 128 heads) is refused
// (the caller decodes the keys for the tier's fp32 loop); a key with a scale code outside [72, 184]
// (|E| > 56, NaN included) or nonzero blocks more than 3 binades apart takes that loop's result for
// itself alone. All-zero blocks (codes ±0) do not count towards the spread.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/kv_row.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/indexer.h"

namespace dsv4::kernels::detail {
namespace {

constexpr int kGroupKeys = 16;
constexpr int64_t kMaxDim = 512;
constexpr int kMaxBlocks = kMaxDim / 32;
constexpr int kMaxHeads = 128;
// Per pass: kBlockHeads heads against kPassGroups key groups, 8 accumulator chains (VPDPBUSD's latency is 4
// cycles and Zen 5 issues 2 per cycle), each key step loaded once for 4 heads and each q dword once for 2
// groups. 8 heads against one group (also 8 chains, but a broadcast per VPDPBUSD) and 4 against one (4 chains)
// were slower: see the commit.
constexpr int kBlockHeads = 4;
constexpr int kPassGroups = 2;
constexpr int kMaxShift = kIndexerMaxShift;  // a block at most 2^3 above its vector's lowest scale
constexpr int kKeyOffset = 96;  // 12 · 2^3: I_k · 2^shift + 96 fits an unsigned byte (0..192)

// The shapes the fixed buffers hold (QInts, the per-thread group).
inline bool vnni_shape(int64_t n_heads, int64_t d) {
  return d % 32 == 0 && d <= kMaxDim && n_heads <= kMaxHeads;
}

// q converted once per call: I · 2^shift (signed bytes, |·| ≤ 15 · 8) stored step-major, steps[8b + s][h] being
// head h's elements 32b + 4s .. + 3 (one dword), so that a pass addresses every broadcast as one base register
// plus a constant; per head 2^E_min and the accumulator start −96 · Σ (which cancels the keys' offset).
struct QInts {
  alignas(64) int32_t steps[kMaxDim / 4][kMaxHeads];
  float scale[kMaxHeads];
  int32_t init[kMaxHeads];
};

// False when a head is not of the integer form (indexer_vector_to_ints_avx2: blocks I · 2^E within kMaxShift
// binades of each other).
bool convert_q(const float* q, int64_t n_heads, int64_t d, QInts& out) {
  alignas(64) int8_t ints[kMaxDim];
  for (int64_t h = 0; h < n_heads; ++h) {
    if (!indexer_vector_to_ints_avx2(q + h * d, d, ints, &out.scale[h])) return false;
    int32_t sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += ints[i];
    out.init[h] = -kKeyOffset * sum;
    for (int64_t st = 0; st < d / 4; ++st) std::memcpy(&out.steps[st][h], ints + 4 * st, 4);
  }
  return true;
}

// One group of 16 keys in group_lines(d) = 8·nb + 2 lines of 64 bytes: line 8b + s holds step s of block b
// (lane j: key j's elements 32b + 4s .. + 3 as I · 2^shift + 96), line 8·nb the keys' 2^E_min, line 8·nb + 1
// (first dword) the mask of the keys the fp32 loop takes. The same layout serves one call (a per-thread
// group) and many (indexer_prepare_packed: every group of a key set, converted once).
inline int64_t group_lines(int64_t d) {
  return 8 * (d / 32) + 2;
}
inline uint8_t* step_line(IndexerKeyLine* g, int64_t b, int64_t s) {
  return g[8 * b + s].bytes;
}
inline const uint8_t* step_line(const IndexerKeyLine* g, int64_t b, int64_t s) {
  return g[8 * b + s].bytes;
}
inline float* scale_line(IndexerKeyLine* g, int64_t nb) {
  return reinterpret_cast<float*>(g[8 * nb].bytes);
}
inline const float* scale_line(const IndexerKeyLine* g, int64_t nb) {
  return reinterpret_cast<const float*>(g[8 * nb].bytes);
}
inline uint32_t fallback_mask(const IndexerKeyLine* g, int64_t nb) {
  uint32_t m;
  std::memcpy(&m, g[8 * nb + 1].bytes, sizeof(m));
  return m;
}

// The key byte of each (shift, code): entry 16·shift + code = 2·E2M1(code) · 2^shift + 96.
struct KeyTable {
  alignas(64) uint8_t bytes[64];
};
constexpr KeyTable make_key_table() {
  constexpr int kTwiceE2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  KeyTable t{};
  for (int i = 0; i < 64; ++i) t.bytes[i] = static_cast<uint8_t>(kTwiceE2m1[i % 16] * (1 << (i / 16)) + kKeyOffset);
  return t;
}
constexpr KeyTable kKeyTable = make_key_table();

// Codes and scale codes of zeros, for the lanes of a group past its last key (scale code 0 flags them).
alignas(64) constexpr uint8_t kEmptyKey[kMaxDim / 2 + kMaxBlocks] = {};

// Fills group g from packed keys t0 .. t0 + nk − 1 (nk ≤ 16), with the mask of the keys the fp32 loop takes: a
// scale code outside [72, 184] (|E| > 56, NaN included), or nonzero blocks more than kMaxShift binades
// apart. Their lanes (and those past nk) hold finite values that the caller overwrites.
void convert_keys(const uint8_t* const* keys, int64_t d, int64_t t0, int64_t nk, IndexerKeyLine* g) {
  const int64_t nb = d / 32;
  const uint8_t* src[kGroupKeys];
  for (int j = 0; j < kGroupKeys; ++j) src[j] = j < nk ? keys[t0 + j] : kEmptyKey;
  alignas(64) uint32_t quads[kMaxBlocks / 4][kGroupKeys];  // quads[c][j]: scale codes of blocks 4c .. 4c + 3
  index_key_scale_quads(src, kGroupKeys, d, &quads[0][0]);
  auto codes = [&](int64_t b) {  // the 16 keys' scale codes of block b
    return _mm512_and_si512(_mm512_srli_epi32(_mm512_load_si512(quads[b / 4]), static_cast<unsigned>(8 * (b % 4))),
                            _mm512_set1_epi32(0xFF));
  };
  // Pass 1: the code dwords transposed (kept in the step lines, which pass 2 overwrites in place), which blocks
  // are nonzero (codes other than ±0: 0 and 8), and per key the lowest and highest scale code among them.
  const __m512i magnitude = _mm512_set1_epi32(0x77777777);
  __mmask16 bad = 0, nonzero[kMaxBlocks];
  __m512i lo = _mm512_set1_epi32(255), hi = _mm512_setzero_si512();
  for (int64_t b = 0; b < nb; ++b) {
    // z[c]: 128-bit lane l holds key 4l + c's block b (16 code bytes = 4 dwords).
    __m512i z[4];
    for (int c = 0; c < 4; ++c) {
      z[c] = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[c] + 16 * b)));
      z[c] = _mm512_inserti32x4(z[c], _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[4 + c] + 16 * b)), 1);
      z[c] = _mm512_inserti32x4(z[c], _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[8 + c] + 16 * b)), 2);
      z[c] = _mm512_inserti32x4(z[c], _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[12 + c] + 16 * b)), 3);
    }
    // 4 × 4 dword transposes in every 128-bit lane: t[m] dword 4l + c = dword m of key 4l + c.
    const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]), a1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]), a3 = _mm512_unpackhi_epi32(z[2], z[3]);
    const __m512i t[4] = {_mm512_unpacklo_epi64(a0, a2), _mm512_unpackhi_epi64(a0, a2), _mm512_unpacklo_epi64(a1, a3),
                          _mm512_unpackhi_epi64(a1, a3)};
    for (int m = 0; m < 4; ++m) _mm512_store_si512(step_line(g, b, m), t[m]);
    const __m512i any = _mm512_or_si512(_mm512_or_si512(t[0], t[1]), _mm512_or_si512(t[2], t[3]));
    nonzero[b] = _mm512_test_epi32_mask(any, magnitude);
    const __m512i e = codes(b);
    bad |= _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(72)) | _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(184));
    lo = _mm512_mask_min_epi32(lo, nonzero[b], lo, e);
    hi = _mm512_mask_max_epi32(hi, nonzero[b], hi, e);
  }
  bad |= _mm512_cmpgt_epi32_mask(_mm512_sub_epi32(hi, lo), _mm512_set1_epi32(kMaxShift));  // all-zero keys: < 0
  lo = _mm512_mask_mov_epi32(lo, bad | _mm512_cmpeq_epi32_mask(lo, _mm512_set1_epi32(255)), _mm512_set1_epi32(128));
  _mm512_store_ps(scale_line(g, nb), _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(lo, _mm512_set1_epi32(1)),
                                                                           23)));  // 2^(e − 128)

  // Pass 2, per step: byte k of a dword lane takes bits 4k.. of the lane's low word (even step) or high word
  // (odd step); a qword holds two lanes, so the second lane's selectors are 32 further. The nibble, with the
  // lane's shift in bits 4-5, indexes the table: entry 16·shift + code = 2·E2M1(code) · 2^shift + 96.
  const __m512i even = _mm512_set1_epi64(0x2C2824200C080400LL), odd = _mm512_set1_epi64(0x3C3834301C181410LL);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_load_si512(kKeyTable.bytes);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i shift = _mm512_maskz_sub_epi32(nonzero[b] & static_cast<__mmask16>(~bad), codes(b), lo);
    const __m512i sb = _mm512_mullo_epi32(shift, _mm512_set1_epi32(0x10101010));  // shift · 16 in every byte
    __m512i t[4];  // all four read before the block's eight steps overwrite them
    for (int m = 0; m < 4; ++m) t[m] = _mm512_load_si512(step_line(g, b, m));
    // Dword m of a key: elements 8m .. 8m + 7 of the block, steps 2m (low word) and 2m + 1.
    for (int m = 0; m < 4; ++m) {
      // (selected & 0x0F) | shift bits: ternary-logic function 0xEA = (A & B) | C.
      const __m512i lo_idx = _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(even, t[m]), nibble, sb, 0xEA);
      const __m512i hi_idx = _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(odd, t[m]), nibble, sb, 0xEA);
      _mm512_store_si512(step_line(g, b, 2 * m), _mm512_permutexvar_epi8(lo_idx, table));
      _mm512_store_si512(step_line(g, b, 2 * m + 1), _mm512_permutexvar_epi8(hi_idx, table));
    }
  }
  const uint32_t fallback = bad & ((1u << nk) - 1u);
  std::memcpy(g[8 * nb + 1].bytes, &fallback, sizeof(fallback));
}

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_finite_x16

// The reference's per-head steps for one head's 16 keys, its dots being the exact integers acc times
// ks · qs, added to the double head sums (keys 0-7 in lo, 8-15 in hi).
inline void add_head(__m512i acc, __m512 ks, float qs, float w, __m512d& lo, __m512d& hi) {
  // |acc| ≤ 128 · 120 · 96 < 2^24: exact in fp32, and so is its product with a power of two (normal).
  const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(ks, _mm512_set1_ps(qs)));
  const __m512 s = _mm512_max_ps(round_bf16_finite_x16(dot), _mm512_setzero_ps());
  const __m512 term = round_bf16_finite_x16(_mm512_mul_ps(s, _mm512_set1_ps(w)));
  lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(term)));
  hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(term, 1)));
}

// Heads [h0, h0 + NH) against NG key groups: each (head, key) dot as one exact integer in acc (NG · NH
// accumulator chains over all blocks; each group's step vector loaded once for its NH heads; with NG > 1 each
// q dword broadcast once for the NG groups, else folded into VPDPBUSD). kDone: also the per-head steps of
// the previous pass's heads (done, from head h_done), spread among the VPDPBUSD so that they use the other
// vector pipes while these run (after the pass, they left the VPDPBUSD pipes idle: 62% of their peak on
// Zen 4). NB: blocks per head when known at compile time (4: head_dim 128), else 0.
// NOTE: inline asm for the dots: GCC neither folds the q broadcast into VPDPBUSD nor keeps the chains in
// registers on its own (it spilled them).
template <int NH, int NG, int NB, bool kDone>
inline void heads_pass(const QInts& q, int64_t d, int64_t h0, const IndexerKeyLine* const* g, __m512i (&acc)[NG][NH],
                       const __m512i (&done)[NG][NH], int64_t h_done, const float* w, const __m512* ks, __m512d* lo,
                       __m512d* hi) {
  const int64_t nb = NB > 0 ? NB : d / 32;
#pragma GCC unroll 2
  for (int n = 0; n < NG; ++n) {
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) acc[n][h] = _mm512_set1_epi32(q.init[h0 + h]);
  }
#pragma GCC unroll 4
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      __m512i kv[NG];
#pragma GCC unroll 2
      for (int n = 0; n < NG; ++n) kv[n] = _mm512_load_si512(step_line(g[n], b, s));
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) {
        const int32_t& qd = q.steps[8 * b + s][h0 + h];
        if constexpr (NG == 1) {
          asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc[0][h]) : "v"(kv[0]), "m"(qd));
        } else {
          __m512i qv;
          asm("vpbroadcastd %1, %0" : "=v"(qv) : "m"(qd));
#pragma GCC unroll 2
          for (int n = 0; n < NG; ++n) asm("vpdpbusd %2, %1, %0" : "+v"(acc[n][h]) : "v"(kv[n]), "v"(qv));
        }
      }
      if constexpr (kDone) {
        const int64_t k = 8 * b + s, every = 8 * nb / (NG * NH) > 0 ? 8 * nb / (NG * NH) : 1;
        if (k % every == 0 && k / every < NG * NH) {
          const int64_t i = k / every, n = i / NH, h = i % NH;
          add_head(done[n][h], ks[n], q.scale[h_done + h], w[h_done + h], lo[n], hi[n]);
        }
      }
    }
  }
}

// Scores keys t0 .. t0 + nk − 1 (nk ≤ 16 · NG, 16 to each group g[n]) from their converted groups; keys
// flagged in a group take the fp32 loop on their decoded rows. Every loop over acc / done is unrolled by
// pragma so that the arrays live in registers (else GCC kept them in memory: a store after every VPDPBUSD).
template <int NG, int NB>
void score_groups(const QInts& qi, int64_t n_heads, int64_t d, const float* q, const uint8_t* const* keys, int64_t t0,
                  int64_t nk, const IndexerKeyLine* const* g, const float* w, float* scores, IndexerScoresFn fp32) {
  const int64_t nb = d / 32;
  __m512d lo[NG], hi[NG];
  __m512 ks[NG];
#pragma GCC unroll 2
  for (int n = 0; n < NG; ++n) {
    lo[n] = hi[n] = _mm512_setzero_pd();
    ks[n] = _mm512_load_ps(scale_line(g[n], nb));
  }
  int64_t h = 0;
  if (n_heads >= kBlockHeads) {
    // Each pass's heads finish in the next pass (heads_pass kDone), the last ones after the loop.
    __m512i done[NG][kBlockHeads], acc[NG][kBlockHeads];
    heads_pass<kBlockHeads, NG, NB, false>(qi, d, 0, g, done, done, 0, w, ks, lo, hi);
    for (h = kBlockHeads; h + kBlockHeads <= n_heads; h += kBlockHeads) {
      heads_pass<kBlockHeads, NG, NB, true>(qi, d, h, g, acc, done, h - kBlockHeads, w, ks, lo, hi);
#pragma GCC unroll 2
      for (int n = 0; n < NG; ++n)
#pragma GCC unroll 8
        for (int i = 0; i < kBlockHeads; ++i) done[n][i] = acc[n][i];
    }
#pragma GCC unroll 2
    for (int n = 0; n < NG; ++n)
#pragma GCC unroll 8
      for (int i = 0; i < kBlockHeads; ++i)
        add_head(done[n][i], ks[n], qi.scale[h - kBlockHeads + i], w[h - kBlockHeads + i], lo[n], hi[n]);
  }
  for (; h < n_heads; ++h) {
    __m512i one[NG][1];
    heads_pass<1, NG, NB, false>(qi, d, h, g, one, one, 0, w, ks, lo, hi);
#pragma GCC unroll 2
    for (int n = 0; n < NG; ++n) add_head(one[n][0], ks[n], qi.scale[h], w[h], lo[n], hi[n]);
  }
  for (int n = 0; n < NG && kGroupKeys * n < nk; ++n) {
    const int64_t t = t0 + kGroupKeys * n, nt = std::min<int64_t>(nk - kGroupKeys * n, kGroupKeys);
    alignas(64) float out[kGroupKeys];
    _mm512_store_ps(out, round_bf16_finite_x16(_mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo[n])),
                                                                  _mm512_cvtpd_ps(hi[n]), 1)));
    const uint32_t fallback = fallback_mask(g[n], nb) & ((1u << nt) - 1u);
    if (fallback != 0) {
      thread_local float decoded[kGroupKeys * kMaxDim];
      float raw[kGroupKeys];
      const int64_t key_bytes = index_key_bytes(d);
      for (int64_t j = 0; j < nt; ++j)
        decode_index_key({keys[t + j], static_cast<size_t>(key_bytes)}, {decoded + j * d, static_cast<size_t>(d)});
      fp32(q, n_heads, d, decoded, 0, nt, w, raw);
      for (int64_t j = 0; j < nt; ++j)
        if (fallback & (1u << j)) out[j] = raw[j];
    }
    std::memcpy(scores + t, out, static_cast<size_t>(nt) * sizeof(float));
  }
}

// Keys [k0, k1), kPassGroups groups at a time: each converted into a per-thread group (prepared == nullptr),
// or read from the prepared groups of the whole key set (k0 a multiple of 16).
template <int NB>
void score_range(const QInts& qi, int64_t n_heads, int64_t d, const float* q, const uint8_t* const* keys, int64_t k0,
                 int64_t k1, const IndexerKeyLine* prepared, const float* w, float* scores, IndexerScoresFn fp32) {
  thread_local IndexerKeyLine own[kPassGroups][8 * kMaxBlocks + 2];
  const int64_t lines = group_lines(d);
  auto group = [&](int64_t t0, int n) -> const IndexerKeyLine* {
    if (prepared) return prepared + (t0 / kGroupKeys) * lines;
    convert_keys(keys, d, t0, std::min<int64_t>(k1 - t0, kGroupKeys), own[n]);
    return own[n];
  };
  static_assert(kPassGroups == 2, "score_range takes the groups in pairs");
  int64_t t0 = k0;
  for (; k1 - t0 > kGroupKeys; t0 += 2 * kGroupKeys) {
    const IndexerKeyLine* const g[2] = {group(t0, 0), group(t0 + kGroupKeys, 1)};
    score_groups<2, NB>(qi, n_heads, d, q, keys, t0, std::min<int64_t>(k1 - t0, 2 * kGroupKeys), g, w, scores, fp32);
  }
  if (t0 < k1) {  // the last group alone (at most 16 keys are left)
    const IndexerKeyLine* const g[1] = {group(t0, 0)};
    score_groups<1, NB>(qi, n_heads, d, q, keys, t0, k1 - t0, g, w, scores, fp32);
  }
}

bool score(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t k0, int64_t k1,
           const IndexerKeyLine* prepared, const float* w, float* scores, IndexerScoresFn fp32) {
  thread_local QInts qi;
  if (!vnni_shape(n_heads, d) || !convert_q(q, n_heads, d, qi)) return false;
  if (d == 128) {
    score_range<4>(qi, n_heads, d, q, keys, k0, k1, prepared, w, scores, fp32);
  } else {
    score_range<0>(qi, n_heads, d, q, keys, k0, k1, prepared, w, scores, fp32);
  }
  return true;
}

}  // namespace

bool indexer_scores_packed_avx512vnni(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys,
                                      int64_t k0, int64_t k1, const float* w, float* scores, IndexerScoresFn fp32) {
  return score(q, n_heads, d, keys, k0, k1, nullptr, w, scores, fp32);
}

int64_t indexer_prepared_lines_avx512vnni(int64_t n_keys, int64_t d) {
  if (!vnni_shape(1, d)) return 0;
  return (n_keys + kGroupKeys - 1) / kGroupKeys * group_lines(d);
}

void indexer_prepare_packed_avx512vnni(const uint8_t* const* keys, int64_t d, int64_t k0, int64_t k1,
                                       IndexerKeyLine* lines) {
  const int64_t per_group = group_lines(d);
  for (int64_t t0 = k0; t0 < k1; t0 += kGroupKeys)
    convert_keys(keys, d, t0, k1 - t0 < kGroupKeys ? k1 - t0 : kGroupKeys, lines + (t0 / kGroupKeys) * per_group);
}

bool indexer_scores_prepared_avx512vnni(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys,
                                        const IndexerKeyLine* lines, int64_t k0, int64_t k1, const float* w,
                                        float* scores, IndexerScoresFn fp32) {
  return score(q, n_heads, d, keys, k0, k1, lines, w, scores, fp32);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
