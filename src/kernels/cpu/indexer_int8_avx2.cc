// kernels: the lightning-indexer scores on AVX2 integer dot products (vpmaddubsw), the AVX2 tier's indexer.
//
// Why integers: the indexer's q and keys are FP4-simulated (spec §2.6: E2M1 × a power of two per 32-block),
// so every 32-block of either is I · 2^E with I small integers: with E = ⌊log2 max|x|⌋ − 3 for the block,
// |I| < 16, and for an E2M1 block I is 2·E2M1 times 1, 2, 4 or 8 (|I| ≤ 12). Packed keys (the model's
// storage, indexer_scores_packed) give I = 2·E2M1 directly by one vpshufb per nibble and E = e8m0 − 128.
// After the Hadamard rotation a vector's blocks have nearly the same scale, so q_h is taken as
// I · 2^shift · 2^E_min with shift = E − E_min ≤ 3 per block (bytes, |·| ≤ 120), and so is each key, whose
// shifts are applied per block instead: the block's 16-bit sums are folded to 32 bits by one vpmaddwd against
// 2^shift per key lane. The whole q_h·k_t is then ONE exact integer (|·| ≤ 16 blocks · 32 · 120 · 15 · 8 <
// 2^23) times 2^(E_min,q + E_min,k): one rounding, the reference's (double dots) bit for bit, with no
// condition on how the products' binades spread. Every later step (bf16, ReLU, · w_h, bf16, double head
// sum in head order) is the fp32 loop's, on 8 keys in lanes.
//
// vpmaddubsw multiplies unsigned by signed bytes, adding pairs into 16-bit lanes: the key is the unsigned
// side (I + 15: 0..30), q the signed one, so a pair is at most 2 · 30 · 120 (no saturation), and each 16-bit
// lane ends a block at its own share of the true sum (≤ 16 products · 120 · 15 < 2^15) once it starts at
// −15 · Σ of the q bytes it meets (per head and block, computed with q): the lane sums wrap modulo 2^16 on
// the way without harm.
//
// Keys go 8 to a group: per block b and step s one 32-byte vector holding 4 elements of each of the 8 keys
// (key j at bytes 4j .. 4j + 3). A packed key's block is 16 code bytes, 8 elements to a dword: the codes'
// dwords of the 8 keys are transposed (two keys per vector by 128-bit inserts, then in-lane unpacks), and each
// transposed dword gives two steps, its low nibbles (elements 8m, 8m + 2, 8m + 4, 8m + 6) and its high ones
// (8m + 1, 8m + 3, ...), by one table lookup each. q's bytes take the same order (to_step_order); so do fp32
// keys' (block_to_ints, the byte shuffle, then an 8 × 8 dword transpose). Four heads and two groups per pass:
// each pair of steps is four key-vector loads, eight q broadcasts and 32 integer ops.
//
// Fallbacks, each keeping a value's result independent of its neighbours: a q not of that form (a block not
// I · 2^E, nonzero blocks more than 3 binades apart; head_dim not a multiple of 32 or > kMaxDim) sends the
// whole call to the fp32 loop; a key not of it (the same tests; packed: a scale code outside [72, 184], NaN
// included, or nonzero blocks more than 3 binades apart) takes its own result from the fp32 loop (run on
// its 8-key group, whose lanes do not interact). All-zero blocks do not count towards the spread.
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
constexpr int kMaxBlocks = kMaxDim / 32;
constexpr int kKeyOffset = 15;  // I_k + 15 fits an unsigned byte (0..30); |I| ≤ 15

// One 32-block x → I (32 int8, x = I · 2^E) and E (0 for all zeros); false when x is not of that form with
// |I| ≤ 15 and |E| ≤ 56 (so that the product of a q's and a key's 2^E_min, in [2^-112, 2^112], is a normal
// fp32: the dot's one rounding is then the multiply by it, which rounds the exact value as the reference's
// conversion of its double dot does, to inf or a subnormal included).
bool block_to_ints(const float* x, __m256i* out, int* exponent) {
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
    *exponent = 0;
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
  *exponent = e;
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

// Within each 8-element group, the order of the steps' bytes: one dword of a packed key's codes holds 8
// elements, and its low nibbles (the even elements) make one step, its high nibbles the next.
inline __m256i to_step_order(__m256i ints) {
  const __m256i order = _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15,  //
                                         0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
  return _mm256_shuffle_epi8(ints, order);
}

inline float power_of_two(int e) {  // e in [−126, 127]
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// The blocks of one vector x[nb · 32] as I · 2^shift · 2^E_min: ints[b] (32 int8 I in element order, |I| ≤ 15),
// shifts[b] and E_min; false when a block is not I · 2^E (block_to_ints) or its nonzero blocks are more than
// kIndexerMaxShift binades apart. All-zero blocks take shift 0, an all-zero vector E_min 0.
bool vector_to_ints(const float* x, int64_t nb, __m256i* ints, int* shifts, int* e_min) {
  int exps[kMaxBlocks];
  int lo = 255, hi = -255;
  for (int64_t b = 0; b < nb; ++b) {
    int e = 0;
    if (!block_to_ints(x + 32 * b, &ints[b], &e)) return false;
    const bool zero = _mm256_testz_si256(ints[b], ints[b]) != 0;
    exps[b] = zero ? 255 : e;
    if (!zero) {
      lo = exps[b] < lo ? exps[b] : lo;
      hi = exps[b] > hi ? exps[b] : hi;
    }
  }
  if (hi - lo > kIndexerMaxShift) return false;  // all zeros: hi − lo < 0
  *e_min = lo == 255 ? 0 : lo;
  for (int64_t b = 0; b < nb; ++b) shifts[b] = exps[b] == 255 ? 0 : exps[b] - *e_min;
  return true;
}

// 32 int8 I (|I| ≤ 15) times 2^shift (shift ≤ 3: |·| ≤ 120 still bytes). vpsllw has no byte form: each word's
// low byte is shifted in place and masked (what crosses into the high byte is its sign extension), the high
// byte masked first.
inline __m256i shift_ints(__m256i ints, int shift) {
  const __m128i count = _mm_cvtsi32_si128(shift);
  const __m256i lo = _mm256_and_si256(_mm256_sll_epi16(ints, count), _mm256_set1_epi16(0x00FF));
  const __m256i hi = _mm256_sll_epi16(_mm256_and_si256(ints, _mm256_set1_epi16(static_cast<int16_t>(0xFF00))), count);
  return _mm256_or_si256(lo, hi);
}

// q converted once per call: per head the bytes I · 2^shift [d] in step order, 2^E_min, and per block the
// 16-bit lane starts (low half: −15 · Σ of the q bytes the even lanes meet, bytes 0 and 1 of each step's
// dword; high half: the odd lanes', bytes 2 and 3).
struct QInts {
  alignas(32) int8_t bytes[kMaxHeads * kMaxDim];
  int32_t init[kMaxHeads * kMaxBlocks];
  float scale[kMaxHeads];
};

bool convert_q(const float* q, int64_t n_heads, int64_t d, QInts& out) {
  const int64_t nb = d / 32;
  const __m256i pair_sums = _mm256_set1_epi16(0x0101);  // vpmaddubsw against ones: byte pairs summed
  for (int64_t h = 0; h < n_heads; ++h) {
    __m256i ints[kMaxBlocks];
    int shifts[kMaxBlocks], e_min = 0;
    if (!vector_to_ints(q + h * d, nb, ints, shifts, &e_min)) return false;
    out.scale[h] = power_of_two(e_min);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i v = to_step_order(shift_ints(ints[b], shifts[b]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(out.bytes + h * d + 32 * b), v);
      // Word w of v sums q bytes 2w, 2w + 1: dword s's low word is step s's even-lane pair, its high word the
      // odd-lane pair; the 8 steps' words summed per half.
      alignas(32) int16_t words[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words), _mm256_maddubs_epi16(pair_sums, v));
      int32_t even = 0, odd = 0;
      for (int w = 0; w < 16; w += 2) {
        even += words[w];
        odd += words[w + 1];
      }
      // |15 · Σ| ≤ 15 · 16 · 120 < 2^15: each half fits its 16-bit lane.
      out.init[h * nb + b] = static_cast<int32_t>((static_cast<uint32_t>(-kKeyOffset * odd) << 16) |
                                                  (static_cast<uint32_t>(-kKeyOffset * even) & 0xFFFFu));
    }
  }
  return true;
}

// One group of 8 keys: for block b and step s, vector (b·8 + s) holds 4 elements (in step order) of key j as
// I + 15 at bytes 4j .. 4j + 3; per block the vpmaddwd multipliers (2^shift of key j in words 2j, 2j + 1)
// and per key 2^E_min.
struct KeyGroup {
  alignas(32) uint8_t bytes[kMaxBlocks * 8 * 32];
  alignas(32) int16_t mult[kMaxBlocks][2 * kGroupKeys];
  alignas(32) float scale[kGroupKeys];
};

// Converts fp32 keys t0 .. t0 + nk − 1 (nk ≤ 8; missing keys and keys not of the integer form become zeros).
// Returns the bit mask of keys that need the fp32 loop.
unsigned convert_keys(const float* keys, int64_t d, int64_t t0, int64_t nk, KeyGroup& g) {
  const int64_t nb = d / 32;
  const __m256i offset = _mm256_set1_epi8(kKeyOffset);
  unsigned fallback = 0;
  __m256i v[kMaxBlocks][kGroupKeys];
  for (int j = 0; j < kGroupKeys; ++j) {
    __m256i ints[kMaxBlocks];
    int shifts[kMaxBlocks], e_min = 0;
    const bool ok = j < nk && vector_to_ints(keys + (t0 + j) * d, nb, ints, shifts, &e_min);
    if (j < nk && !ok) fallback |= 1u << j;
    for (int64_t b = 0; b < nb; ++b) {
      v[b][j] = ok ? to_step_order(_mm256_add_epi8(ints[b], offset)) : offset;
      g.mult[b][2 * j] = g.mult[b][2 * j + 1] = static_cast<int16_t>(ok ? 1 << shifts[b] : 1);
    }
    g.scale[j] = ok ? power_of_two(e_min) : 1.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    transpose8x8_epi32(v[b]);
    for (int s = 0; s < 8; ++s) _mm256_store_si256(reinterpret_cast<__m256i*>(g.bytes + (b * 8 + s) * 32), v[b][s]);
  }
  return fallback;
}

// Codes and scale codes of zeros, for the lanes of keys past the last one or taken by the fp32 loop.
alignas(32) constexpr uint8_t kEmptyKey[kMaxDim / 2 + kMaxBlocks] = {};

// The same from packed index keys (core/kv_row.h: d/2 bytes of E2M1 codes, low nibble first, then one E8M0
// scale per 32): I = 2·E2M1 by a table lookup per nibble, E = e − 128, exact for every code. The 8 keys'
// tests run in dword lanes, one key per lane.
unsigned convert_packed_keys(const uint8_t* const* keys, int64_t d, int64_t t0, int64_t nk, KeyGroup& g) {
  const int64_t nb = d / 32;
  const uint8_t* src[kGroupKeys];
  for (int j = 0; j < kGroupKeys; ++j) src[j] = j < nk ? keys[t0 + j] : kEmptyKey;
  alignas(32) uint32_t quads[kMaxBlocks / 4][kGroupKeys];  // quads[c][j]: scale codes of blocks 4c .. 4c + 3
  index_key_scale_quads(src, kGroupKeys, d, &quads[0][0]);
  auto codes = [&](int64_t b) {  // the 8 keys' scale codes of block b
    const __m256i quad = _mm256_load_si256(reinterpret_cast<const __m256i*>(quads[b / 4]));
    return _mm256_and_si256(_mm256_srl_epi32(quad, _mm_cvtsi32_si128(static_cast<int>(8 * (b % 4)))),
                            _mm256_set1_epi32(0xFF));
  };
  auto step = [&](int64_t b, int s) { return reinterpret_cast<__m256i*>(g.bytes + (b * 8 + s) * 32); };
  // Pass 1: the code dwords transposed (kept in the step vectors, which pass 2 overwrites in place), which
  // blocks are nonzero (codes other than ±0: 0 and 8), and per key the lowest and highest scale code among
  // them; all lanes as dword masks.
  const __m256i magnitude = _mm256_set1_epi32(0x77777777), zero = _mm256_setzero_si256();
  __m256i bad = zero, nonzero[kMaxBlocks];
  __m256i lo = _mm256_set1_epi32(255), hi = _mm256_set1_epi32(-1);
  for (int64_t b = 0; b < nb; ++b) {
    // y[c]: key c's block b in the low 128 bits, key c + 4's in the high (16 code bytes = 4 dwords each).
    __m256i y[4];
    for (int c = 0; c < 4; ++c)
      y[c] = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[c] + 16 * b))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[4 + c] + 16 * b)), 1);
    // 4 × 4 dword transposes in both lanes: t[m] dword j = dword m of key j (elements 8m .. 8m + 7).
    const __m256i a0 = _mm256_unpacklo_epi32(y[0], y[1]), a1 = _mm256_unpackhi_epi32(y[0], y[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(y[2], y[3]), a3 = _mm256_unpackhi_epi32(y[2], y[3]);
    const __m256i t[4] = {_mm256_unpacklo_epi64(a0, a2), _mm256_unpackhi_epi64(a0, a2), _mm256_unpacklo_epi64(a1, a3),
                          _mm256_unpackhi_epi64(a1, a3)};
    for (int m = 0; m < 4; ++m) _mm256_store_si256(step(b, m), t[m]);
    const __m256i any = _mm256_or_si256(_mm256_or_si256(t[0], t[1]), _mm256_or_si256(t[2], t[3]));
    nonzero[b] = _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(any, magnitude), zero), _mm256_set1_epi32(-1));
    const __m256i e = codes(b);
    bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(72), e),
                                               _mm256_cmpgt_epi32(e, _mm256_set1_epi32(184))));
    lo = _mm256_blendv_epi8(lo, _mm256_min_epi32(lo, e), nonzero[b]);
    hi = _mm256_blendv_epi8(hi, _mm256_max_epi32(hi, e), nonzero[b]);
  }
  bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(_mm256_sub_epi32(hi, lo), _mm256_set1_epi32(kIndexerMaxShift)));
  const __m256i no_scale = _mm256_or_si256(bad, _mm256_cmpeq_epi32(lo, _mm256_set1_epi32(255)));  // 2^0 for these
  lo = _mm256_blendv_epi8(lo, _mm256_set1_epi32(128), no_scale);
  const __m256i scale_bits = _mm256_slli_epi32(_mm256_sub_epi32(lo, _mm256_set1_epi32(1)), 23);  // 2^(e − 128)
  _mm256_store_ps(g.scale, _mm256_castsi256_ps(scale_bits));
  // Pass 2: per dword m of a key's block (elements 8m .. 8m + 7), its low nibbles make step 2m and its high
  // ones step 2m + 1, through the table; the keys the fp32 loop takes read as zeros (codes 0).
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(15, 16, 17, 18, 19, 21, 23, 27, 15, 14, 13, 12, 11, 9, 7, 3));  // 2·E2M1(code) + 15
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    // 2^shift in both words of each key's dword (a zero block, or a key the fp32 loop takes: 1).
    const __m256i shift = _mm256_andnot_si256(bad, _mm256_and_si256(nonzero[b], _mm256_sub_epi32(codes(b), lo)));
    const __m256i mult = _mm256_sllv_epi32(_mm256_set1_epi32(0x00010001), shift);
    _mm256_store_si256(reinterpret_cast<__m256i*>(g.mult[b]), mult);
    __m256i t[4];  // all four read before the block's eight steps overwrite them
    for (int m = 0; m < 4; ++m) t[m] = _mm256_andnot_si256(bad, _mm256_load_si256(step(b, m)));
    for (int m = 0; m < 4; ++m) {
      _mm256_store_si256(step(b, 2 * m), _mm256_shuffle_epi8(table, _mm256_and_si256(t[m], nibble)));
      _mm256_store_si256(step(b, 2 * m + 1),
                         _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(t[m], 4), nibble)));
    }
  }
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad))) & ((1u << nk) - 1u);
}

inline __m256 round_bf16(__m256 v) {  // to nearest even, finite inputs (core/formats.h round_bf16)
  __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  return _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Heads [h0, h0 + NH) against NG key groups: the fp32 q·k of each (head, key), 8 keys in lanes. Per block
// NG·NH 16-bit accumulators (per step NG key loads and NH q broadcasts, each broadcast feeding every group:
// the broadcasts were 38% of a one-group pass), then each folded into its 32-bit dot by one vpmaddwd against
// the keys' 2^shift. NB: the blocks per head (head_dim / 32) when known at compile time (4: head_dim 128),
// else 0.
template <int NH, int NB, int NG>
inline void group_dots(const QInts& q, int64_t d, int64_t h0, const KeyGroup* g, __m256 (&dot)[NG][NH]) {
  const int64_t nb = NB > 0 ? NB : d / 32;
  __m256i sum[NG][NH];
#pragma GCC unroll 2
  for (int k = 0; k < NG; ++k)
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) sum[k][h] = _mm256_setzero_si256();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[NG][NH];
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const __m256i init = _mm256_set1_epi32(q.init[(h0 + h) * nb + b]);
#pragma GCC unroll 2
      for (int k = 0; k < NG; ++k) acc[k][h] = init;
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
        const int8_t* qp = q.bytes + (h0 + h) * d + 32 * b + 4 * s;
        const __m256i q0 = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(qp)));
        const __m256i q1 = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(qp + 4)));
#pragma GCC unroll 2
        for (int k = 0; k < NG; ++k) {
          acc[k][h] = _mm256_add_epi16(
              acc[k][h], _mm256_add_epi16(_mm256_maddubs_epi16(kv0[k], q0), _mm256_maddubs_epi16(kv1[k], q1)));
          // NOTE: keeps each update here: unrolled, GCC computed all 32 products of a block first and
          // spilled them to the stack (2.2x slower).
          asm("" : "+x"(acc[k][h]));
        }
      }
    }
#pragma GCC unroll 2
    for (int k = 0; k < NG; ++k) {
      const __m256i mult = _mm256_load_si256(reinterpret_cast<const __m256i*>(g[k].mult[b]));
#pragma GCC unroll 4
      for (int h = 0; h < NH; ++h) sum[k][h] = _mm256_add_epi32(sum[k][h], _mm256_madd_epi16(acc[k][h], mult));
    }
  }
#pragma GCC unroll 2
  for (int k = 0; k < NG; ++k) {
    const __m256 ks = _mm256_load_ps(g[k].scale);
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h)  // exact integer (< 2^23) times a power of two: one rounding
      dot[k][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(sum[k][h]), _mm256_mul_ps(ks, _mm256_set1_ps(q.scale[h0 + h])));
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

// Packed keys t0 .. t0 + n − 1 decoded to fp32 and scored by `fp32`.
void packed_fp32(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t t0, int64_t n,
                 const float* w, float* out, IndexerScoresFn fp32) {
  thread_local float buf[kGroupKeys * kMaxDim];
  const int64_t key_bytes = index_key_bytes(d);
  for (int64_t j = 0; j < n; ++j)
    decode_index_key({keys[t0 + j], static_cast<size_t>(key_bytes)}, {buf + j * d, static_cast<size_t>(d)});
  fp32(q, n_heads, d, buf, 0, n, w, out);
}

}  // namespace

bool indexer_vector_to_ints_avx2(const float* x, int64_t d, int8_t* ints, float* scale) {
  const int64_t nb = d / 32;
  __m256i v[kMaxBlocks];
  int shifts[kMaxBlocks], e_min = 0;
  if (!vector_to_ints(x, nb, v, shifts, &e_min)) return false;
  for (int64_t b = 0; b < nb; ++b)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ints + 32 * b), shift_ints(v[b], shifts[b]));
  *scale = power_of_two(e_min);
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
      [&](int64_t t0, int64_t nk, float* out) {
        indexer_scores_avx2_fp32(q, n_heads, d, keys + t0 * d, 0, nk, w, out);
      });
}

bool indexer_scores_packed_avx2(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t k0,
                                int64_t k1, const float* w, float* scores, IndexerScoresFn fp32) {
  thread_local QInts qi;
  if (d % 32 != 0 || d > kMaxDim || n_heads > kMaxHeads || !convert_q(q, n_heads, d, qi)) return false;
  score_all(
      qi, n_heads, d, k0, k1, w, scores,
      [&](int64_t t0, int64_t nk, KeyGroup& g) { return convert_packed_keys(keys, d, t0, nk, g); },
      [&](int64_t t0, int64_t nk, float* out) { packed_fp32(q, n_heads, d, keys, t0, nk, w, out, fp32); });
  return true;
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
