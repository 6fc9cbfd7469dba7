// kernels: the lightning-indexer scores on AVX2 integer dot products (vpmaddubsw), the AVX2 tier's indexer.
//
// Why integers: the indexer's q and keys are FP4-simulated (spec §2.6: E2M1 × a power of two per 32-block),
// so every 32-block of either is I · 2^E with I small integers: with E = ⌊log2 max|x|⌋ − 3 for the block,
// |I| < 16, and for an E2M1 block I is 2·E2M1 times 1, 2, 4 or 8 (|I| ≤ 12). Packed keys (the model's
// storage, indexer_scores_packed) give I = 2·E2M1 directly by one vpshufb per nibble and E = e8m0 − 128.
// The block dot Σ I_q·I_k is then an exact integer (|·| ≤ 32·225): one vpmaddubsw + vpaddw per 32 products,
// where fp32 takes 4 FMAs plus their loads (the fp32 loop this replaces ran at ~1/6 of the FMA peak here).
// vpmaddubsw multiplies unsigned by signed bytes, so q enters as I_q + 15 (0..30) and the 16-bit
// accumulators start at −15·Σ I_k (set_init). A block's dot times 2^(E_q + E_k) is exact in fp32 (13 bits);
// the blocks of a head are summed in fp32 in block order, exact whenever their scales span at most 9
// binades (the condition kernels/indexer.h states for the fp32 loop), and the scores are then the
// reference's bit for bit. Every later step (bf16, ReLU, · w_h, bf16, double head sum in head order) is the
// fp32 loop's, on 8 keys in lanes.
//
// Keys go 8 to a group, each block transposed so that one 32-byte vector holds elements 4s..4s+3 of all 8
// keys (s < 8): a q dword broadcast against it gives two 16-bit partial sums per key, summed over the
// block's 8 steps in 16 bits (|·| < 2^14) and folded to 32 bits by one vpmaddwd. Four heads per pass: each
// pair of steps is two key-vector loads, eight q broadcasts and 12 integer ops.
//
// Fallbacks, each keeping a value's result independent of its neighbours: a q block that is not of that
// form (or head_dim not a multiple of 32, or > kMaxDim) sends the whole call to the fp32 loop; a key that is
// not (packed: a scale code outside [72, 184]) takes its own result from the fp32 loop (run on its 8-key
// group, whose lanes do not interact).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "core/kv_row.h"
#include "kernels/cpu/attention_tiles.h"

namespace dsv4::kernels::detail {
namespace {

constexpr int kGroupKeys = 8;
constexpr int64_t kMaxDim = 512;
constexpr int kMaxHeads = 128;
constexpr int kQOffset = 15;  // I_q + 15 fits an unsigned byte; |I| ≤ 15

// One 32-block x → I (32 int8, x = I · 2^E) and 2^E; false when x is not of that form with |I| ≤ 15 and
// |E| ≤ 56 (so that a q and a key block's 2^(E_q + E_k) and its block dot times it, below 2^14 · 2^112, are
// normal fp32).
bool block_to_ints(const float* x, __m256i* out, float* scale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));  // a NaN may drop out here: the integer test takes it
  }
  m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
  m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
  const uint32_t bits = static_cast<uint32_t>(_mm256_cvtsi256_si32(_mm256_castps_si256(m)));
  if (bits == 0) {  // all zeros, or NaNs beside zeros
    for (int i = 0; i < 4; ++i)
      if (_mm256_movemask_ps(_mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q)) != 0) return false;
    *out = _mm256_setzero_si256();
    *scale = 1.0f;
    return true;
  }
  const int biased = static_cast<int>(bits >> 23);
  if (biased == 0 || biased == 255) return false;  // a subnormal largest value, or inf
  const int e = biased - 127 - 3;
  if (e < -56 || e > 56) return false;
  const __m256 down = _mm256_castsi256_ps(_mm256_set1_epi32((127 - e) << 23));  // 2^-e
  __m256i ints[4];
  __m256 bad = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    const __m256 y = _mm256_mul_ps(v[i], down);  // exact: a power of two, |y| < 16
    const __m256 r = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(r, y, _CMP_NEQ_UQ));  // not an integer, or NaN
    ints[i] = _mm256_cvtps_epi32(r);
  }
  if (_mm256_movemask_ps(bad) != 0) return false;
  // 32 int32 → 32 int8 in element order (packs work per 128-bit lane: a dword permute restores the order).
  const __m256i w01 = _mm256_packs_epi32(ints[0], ints[1]), w23 = _mm256_packs_epi32(ints[2], ints[3]);
  *out = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  *scale = _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128((127 + e) << 23)));  // 2^e
  return true;
}

// v[j] (8 dwords each) → v[s] holding dword s of every v[j] at position j.
inline void transpose8x8_epi32(__m256i (&v)[8]) {
  __m256i a[8], b[8];
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    a[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    b[4 * i + 0] = _mm256_unpacklo_epi64(a[4 * i + 0], a[4 * i + 2]);
    b[4 * i + 1] = _mm256_unpackhi_epi64(a[4 * i + 0], a[4 * i + 2]);
    b[4 * i + 2] = _mm256_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm256_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  // b[0..3]: rows 0..3 (lane 0: dwords 0..3, lane 1: 4..7) of columns 0,1,2,3 / b[4..7] of columns 4..7.
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2x128_si256(b[i], b[4 + i], 0x20);
    v[4 + i] = _mm256_permute2x128_si256(b[i], b[4 + i], 0x31);
  }
}

// q converted once per call: bytes I + 15 [n_heads][d] and 2^E per (head, block).
struct QInts {
  alignas(32) uint8_t bytes[kMaxHeads * kMaxDim];
  float scale[kMaxHeads * (kMaxDim / 32)];
};

bool convert_q(const float* q, int64_t n_heads, int64_t d, QInts& out) {
  const int64_t nb = d / 32;
  const __m256i offset = _mm256_set1_epi8(kQOffset);
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t b = 0; b < nb; ++b) {
      __m256i ints;
      if (!block_to_ints(q + h * d + 32 * b, &ints, &out.scale[h * nb + b])) return false;
      _mm256_store_si256(reinterpret_cast<__m256i*>(out.bytes + h * d + 32 * b), _mm256_add_epi8(ints, offset));
    }
  return true;
}

// One group of 8 keys in the vpmaddubsw order: for block b and step s, vector (b·8 + s) holds elements
// 32b + 4s .. 32b + 4s + 3 of key j at bytes 4j .. 4j + 3; per block the accumulators' start (set_init:
// the offset's correction) and per block and key 2^E.
struct KeyGroup {
  alignas(32) int8_t bytes[(kMaxDim / 32) * 8 * 32];
  alignas(32) int16_t init[kMaxDim / 32][2 * kGroupKeys];
  alignas(32) float scale[kMaxDim / 32][kGroupKeys];
};

// The accumulators' start of every block of a group from its key vectors: −15·Σ I per key, summed by
// vpmaddubsw against bytes of 15 like a head whose q' is all 15 (16-bit lanes 2j, 2j + 1 of key j together
// hold it; each |·| ≤ 8·2·15·15 = 3600, so with the head's own sum a lane stays below 2^14).
void set_init(int64_t nb, KeyGroup& g) {
  const __m256i fifteen = _mm256_set1_epi8(kQOffset);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i c = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s)
      c = _mm256_sub_epi16(c, _mm256_maddubs_epi16(fifteen, _mm256_load_si256(reinterpret_cast<const __m256i*>(
                                                                g.bytes + (b * 8 + s) * 32))));
    _mm256_store_si256(reinterpret_cast<__m256i*>(g.init[b]), c);
  }
}

// v[b][j]: block b of key j as 32 int8 in element order → the group's vpmaddubsw order, and its init.
void store_group(int64_t nb, __m256i (*v)[kGroupKeys], KeyGroup& g) {
  for (int64_t b = 0; b < nb; ++b) {
    transpose8x8_epi32(v[b]);
    for (int s = 0; s < 8; ++s) _mm256_store_si256(reinterpret_cast<__m256i*>(g.bytes + (b * 8 + s) * 32), v[b][s]);
  }
  set_init(nb, g);
}

// Converts fp32 keys t0 .. t0 + nk − 1 (nk ≤ 8; missing keys and keys that are not FP4-like become zeros).
// Returns the bit mask of keys that need the fp32 loop.
unsigned convert_keys(const float* keys, int64_t d, int64_t t0, int64_t nk, KeyGroup& g) {
  const int64_t nb = d / 32;
  unsigned fallback = 0;
  __m256i v[kMaxDim / 32][kGroupKeys];
  for (int j = 0; j < kGroupKeys; ++j)
    for (int64_t b = 0; b < nb; ++b) {
      float sc = 1.0f;
      if (j >= nk || !block_to_ints(keys + (t0 + j) * d + 32 * b, &v[b][j], &sc)) {
        if (j < nk) fallback |= 1u << j;
        v[b][j] = _mm256_setzero_si256();
      }
      g.scale[b][j] = sc;
    }
  // A key is taken whole by one path: one that fails in any block reads as zeros in all of them.
  for (int j = 0; j < kGroupKeys; ++j)
    if (fallback & (1u << j))
      for (int64_t b = 0; b < nb; ++b) {
        v[b][j] = _mm256_setzero_si256();
        g.scale[b][j] = 1.0f;
      }
  store_group(nb, v, g);
  return fallback;
}

// The same from packed index keys (core/kv_row.h: d/2 bytes of E2M1 codes, low nibble first, then one E8M0
// scale per 32): I = 2·E2M1 by a byte-table lookup per nibble, E = e − 128. Exact for every code; a key
// whose scale codes are outside [72, 184] (|E| > 56), NaN included, takes the fp32 loop.
unsigned convert_packed_keys(const uint8_t* const* keys, int64_t d, int64_t t0, int64_t nk, KeyGroup& g) {
  const int64_t nb = d / 32;
  const __m128i twice_e2m1 = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0F);
  unsigned fallback = 0;
  __m256i v[kMaxDim / 32][kGroupKeys];
  for (int j = 0; j < kGroupKeys; ++j) {
    const uint8_t* key = j < nk ? keys[t0 + j] : nullptr;
    bool ok = key != nullptr;
    for (int64_t b = 0; ok && b < nb; ++b) ok = key[d / 2 + b] >= 72 && key[d / 2 + b] <= 184;
    if (!ok) {
      if (j < nk) fallback |= 1u << j;
      for (int64_t b = 0; b < nb; ++b) {
        v[b][j] = _mm256_setzero_si256();
        g.scale[b][j] = 1.0f;
      }
      continue;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key + 16 * b));
      const __m128i lo = _mm_shuffle_epi8(twice_e2m1, _mm_and_si128(codes, nibble));
      const __m128i hi = _mm_shuffle_epi8(twice_e2m1, _mm_and_si128(_mm_srli_epi16(codes, 4), nibble));
      v[b][j] = _mm256_setr_m128i(_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi));
      g.scale[b][j] = _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128((key[d / 2 + b] - 1) << 23)));  // 2^(e − 128)
    }
  }
  store_group(nb, v, g);
  return fallback;
}

inline __m256 round_bf16(__m256 v) {  // to nearest even, finite inputs (core/formats.h round_bf16)
  __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  return _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Heads [h0, h0 + NH) against NG key groups: the fp32 q·k of each (head, key), 8 keys in lanes. First each
// block's integer dots (NG·NH 16-bit accumulators; per step NG key loads and NH q broadcasts, each
// broadcast feeding every group: the broadcasts were 38% of a one-group pass), kept in memory, then their
// fp32 sums in block order: one loop holding both had GCC spill the accumulators inside the step loop. NB:
// the blocks per head (head_dim / 32) when known at compile time (4: head_dim 128), else 0.
template <int NH, int NB, int NG>
inline void group_dots(const QInts& q, int64_t d, int64_t h0, const KeyGroup* g, __m256 (&dot)[NG][NH]) {
  const int64_t nb = NB > 0 ? NB : d / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) int32_t p[NG][kMaxDim / 32][NH][kGroupKeys];
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[NG][NH];
#pragma GCC unroll 2
    for (int k = 0; k < NG; ++k) {
      const __m256i init = _mm256_load_si256(reinterpret_cast<const __m256i*>(g[k].init[b]));
#pragma GCC unroll 4
      for (int h = 0; h < NH; ++h) acc[k][h] = init;
    }
    // Steps in pairs, the two products added before the accumulator (integer sums are exact in any order).
#pragma GCC unroll 4
    for (int s = 0; s < 8; s += 2) {
      __m256i kv0[NG], kv1[NG];
#pragma GCC unroll 2
      for (int k = 0; k < NG; ++k) {
        kv0[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(g[k].bytes + (b * 8 + s) * 32));
        kv1[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(g[k].bytes + (b * 8 + s + 1) * 32));
      }
#pragma GCC unroll 4
      for (int h = 0; h < NH; ++h) {
        const uint8_t* qp = q.bytes + (h0 + h) * d + 32 * b + 4 * s;
        const __m256i q0 = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(qp)));
        const __m256i q1 = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(qp + 4)));
#pragma GCC unroll 2
        for (int k = 0; k < NG; ++k) {
          acc[k][h] = _mm256_add_epi16(
              acc[k][h], _mm256_add_epi16(_mm256_maddubs_epi16(q0, kv0[k]), _mm256_maddubs_epi16(q1, kv1[k])));
          // NOTE: keeps each update here: unrolled, GCC computed all 32 products of a block first and
          // spilled them to the stack (2.2x slower).
          asm("" : "+x"(acc[k][h]));
        }
      }
    }
#pragma GCC unroll 2
    for (int k = 0; k < NG; ++k)
#pragma GCC unroll 4
      for (int h = 0; h < NH; ++h)  // the block's Σ I_q·I_k per key
        _mm256_store_si256(reinterpret_cast<__m256i*>(p[k][b][h]), _mm256_madd_epi16(acc[k][h], ones));
  }
  // Blocks outer, heads inner (each head's sum still in block order): independent chains side by side.
#pragma GCC unroll 2
  for (int k = 0; k < NG; ++k) {
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) dot[k][h] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t b = 0; b < nb; ++b) {
      const __m256 ks = _mm256_load_ps(g[k].scale[b]);
#pragma GCC unroll 4
      for (int h = 0; h < NH; ++h) {
        const __m256 sc = _mm256_mul_ps(ks, _mm256_set1_ps(q.scale[(h0 + h) * nb + b]));
        // p · 2^(E_q + E_k) is exact (13 bits times a power of two), so the FMA rounds once, as an add of it
        // would.
        dot[k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p[k][b][h]))),
                                    sc, dot[k][h]);
      }
    }
  }
}

// The reference's per-head steps on 8 keys' dots, the double head sum in head order.
template <int NH>
inline void add_terms(const __m256 (&dot)[NH], const float* w, __m256d& lo, __m256d& hi) {
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h) {
    const __m256 s = _mm256_max_ps(round_bf16(dot[h]), zero);
    const __m256 term = round_bf16(_mm256_mul_ps(s, _mm256_set1_ps(w[h])));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(term)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(term, 1)));
  }
}

// Scores keys [k0, k1): convert(t0, nk, g) fills group g with keys t0 .. t0 + nk − 1 and returns the mask of
// those the fp32 loop takes, fp32(t0, nk, out) gives that loop's scores of the group. NG groups (8 keys
// each) per pass, the last pass one group.
template <int NB, int NG, typename Convert, typename Fp32>
void score_pass(const QInts& qi, int64_t n_heads, int64_t d, int64_t t0, int64_t k1, const float* w, float* scores,
                KeyGroup* g, Convert& convert, Fp32& fp32) {
  unsigned fallback[NG];
  int64_t nk[NG];
  __m256d lo[NG], hi[NG];
  for (int k = 0; k < NG; ++k) {
    const int64_t tk = t0 + k * kGroupKeys;
    nk[k] = k1 - tk < kGroupKeys ? k1 - tk : kGroupKeys;
    fallback[k] = convert(tk, nk[k], g[k]);
    lo[k] = hi[k] = _mm256_setzero_pd();
  }
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) {
    __m256 dot[NG][4];
    group_dots<4, NB, NG>(qi, d, h, g, dot);
    for (int k = 0; k < NG; ++k) add_terms<4>(dot[k], w + h, lo[k], hi[k]);
  }
  for (; h < n_heads; ++h) {
    __m256 dot[NG][1];
    group_dots<1, NB, NG>(qi, d, h, g, dot);
    for (int k = 0; k < NG; ++k) add_terms<1>(dot[k], w + h, lo[k], hi[k]);
  }
  for (int k = 0; k < NG; ++k) {
    const int64_t tk = t0 + k * kGroupKeys;
    alignas(32) float out[kGroupKeys];
    _mm256_store_ps(out, round_bf16(_mm256_set_m128(_mm256_cvtpd_ps(hi[k]), _mm256_cvtpd_ps(lo[k]))));
    if (fallback[k] != 0) {
      float raw[kGroupKeys];
      fp32(tk, nk[k], raw);
      for (int j = 0; j < nk[k]; ++j)
        if (fallback[k] & (1u << j)) out[j] = raw[j];
    }
    std::memcpy(scores + tk, out, static_cast<size_t>(nk[k]) * sizeof(float));
  }
}

template <int NB, typename Convert, typename Fp32>
void score_groups(const QInts& qi, int64_t n_heads, int64_t d, int64_t k0, int64_t k1, const float* w,
                  float* scores, KeyGroup* g, Convert convert, Fp32 fp32) {
  int64_t t0 = k0;
  for (; t0 + 2 * kGroupKeys <= k1; t0 += 2 * kGroupKeys)
    score_pass<NB, 2>(qi, n_heads, d, t0, k1, w, scores, g, convert, fp32);
  if (t0 < k1 - kGroupKeys) return score_pass<NB, 2>(qi, n_heads, d, t0, k1, w, scores, g, convert, fp32);
  if (t0 < k1) score_pass<NB, 1>(qi, n_heads, d, t0, k1, w, scores, g, convert, fp32);
}

template <typename Convert, typename Fp32>
void score_all(const QInts& qi, int64_t n_heads, int64_t d, int64_t k0, int64_t k1, const float* w, float* scores,
               Convert convert, Fp32 fp32) {
  thread_local KeyGroup g[2];
  if (d == 128) return score_groups<4>(qi, n_heads, d, k0, k1, w, scores, g, convert, fp32);
  return score_groups<0>(qi, n_heads, d, k0, k1, w, scores, g, convert, fp32);
}

// Packed keys t0 .. t0 + n − 1 decoded to fp32 and scored by the fp32 loop.
void packed_fp32(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t t0, int64_t n,
                 const float* w, float* out) {
  thread_local float buf[kGroupKeys * kMaxDim];
  const int64_t key_bytes = index_key_bytes(d);
  for (int64_t j = 0; j < n; ++j)
    decode_index_key({keys[t0 + j], static_cast<size_t>(key_bytes)}, {buf + j * d, static_cast<size_t>(d)});
  indexer_scores_avx2_fp32(q, n_heads, d, buf, 0, n, w, out);
}

}  // namespace

bool indexer_block_to_ints_avx2(const float* x, int8_t* ints, float* scale) {
  __m256i v;
  if (!block_to_ints(x, &v, scale)) return false;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(ints), v);
  return true;
}

void indexer_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                         const float* w, float* scores) {
  thread_local QInts qi;
  if (d % 32 != 0 || d > kMaxDim || n_heads > kMaxHeads || !convert_q(q, n_heads, d, qi))
    return indexer_scores_avx2_fp32(q, n_heads, d, keys, k0, k1, w, scores);
  score_all(
      qi, n_heads, d, k0, k1, w, scores,
      [&](int64_t t0, int64_t nk, KeyGroup& g) { return convert_keys(keys, d, t0, nk, g); },
      [&](int64_t t0, int64_t nk, float* out) { indexer_scores_avx2_fp32(q, n_heads, d, keys + t0 * d, 0, nk, w, out); });
}

void indexer_scores_packed_avx2(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t k0,
                                int64_t k1, const float* w, float* scores) {
  thread_local QInts qi;
  if (d % 32 != 0 || d > kMaxDim || n_heads > kMaxHeads || !convert_q(q, n_heads, d, qi)) {
    for (int64_t t0 = k0; t0 < k1; t0 += kGroupKeys)
      packed_fp32(q, n_heads, d, keys, t0, k1 - t0 < kGroupKeys ? k1 - t0 : kGroupKeys, w, scores + t0);
    return;
  }
  score_all(
      qi, n_heads, d, k0, k1, w, scores,
      [&](int64_t t0, int64_t nk, KeyGroup& g) { return convert_packed_keys(keys, d, t0, nk, g); },
      [&](int64_t t0, int64_t nk, float* out) { packed_fp32(q, n_heads, d, keys, t0, nk, w, out); });
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
