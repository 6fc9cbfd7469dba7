// kernels (internal): the per-ISA inner loops of the attention kernels (sparse_attention.h, indexer.h).
// The drivers stay in baseline code and own the order of the reference's steps; these functions run the
// steps themselves (dot products, the online-softmax block, P·V, the rescale and the output's division and
// bf16 rounding), each with the bits its comment below states, and an ISA file holds no shared inline or
// template code (see quant_tiles.h). The AVX2 and AVX-512 files share their loops as source only
// (attention_tiles_simd.inc, instantiated privately in each over a per-ISA vector-traits type).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels {
struct IndexerKeyLine;  // indexer.h
}  // namespace dsv4::kernels

namespace dsv4::kernels::detail {

// scores[h * n_rows + j] = (q_h · rows[j]) · scale for h < n_heads, j < n_rows. q: [n_heads, d].
// Scalar: double accumulation in index order, rounded to fp32 (ref::dot_f64); vector ISAs: fp32 lanes.
using AttnScoresFn = void (*)(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                              float scale, float* scores);
// blocks[h * d + i] = Σ_j probs[h * n_rows + j] · rows[j][i] for h < n_heads, i < d, j in order (written,
// not added to). Scalar: in double from 0.0 (exact products, one rounding per addition), rounded to fp32
// once — the reference's bits. Vector ISAs: an fp32 fused multiply-add chain from +0 per (head, i), j in
// order — the accumulation spec §2.8 gives the kernel (bf16 probabilities, fp32 accumulation), at half the
// double lanes' work; within the bound of sparse_attention.h. n_rows ≤ 64 (one online-softmax block).
using AttnPvFn = void (*)(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                          float* blocks);

// acc[i] = acc[i]·rescale + block[i] for i < d: the online softmax folding one head's block of P·V into its
// running sum — an fp32 multiply, then an add (no contraction), exactly the reference's.
using AttnRescaleFn = void (*)(float* acc, const float* block, int64_t d, float rescale);

// out[i] = bf16(acc[i] / l) for i < d: a head's output — the reference's fp32 division and round_bf16, bits
// included (NaN, infinities), on every ISA.
using AttnOutputFn = void (*)(const float* acc, int64_t d, float l, float* out);

// One online-softmax block (the reference's steps, in its order) for n_heads heads of n_rows scores each
// (scores[h * n_rows + j]) against the running maxima m[h]: bmax[h] = std::max over m[h] and the scores in
// order (so a NaN score never becomes the maximum); where bmax[h] is −inf, probs of head h are +0 and
// nothing else of it is written; else rescale[h] = exp(m[h] − bmax[h]), probs[h * n_rows + j] =
// bf16(exp(score − bmax[h])) and psum[h] = Σ_j exp(score − bmax[h]) in double, j in order. Every ISA gives
// the scalar loop's bits: the vector loops (attn_softmax_simd) compute exp with glibc's expf algorithm
// (expf_avx512.inc, expf_avx2.inc, checked against std::exp in kernel_swiglu_test.cc) and take each head's
// maximum over lanes (the same value: only the sign of a zero maximum can differ, and every use of it is an
// exp of a difference, where ±0 agree).
using AttnSoftmaxFn = void (*)(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                               float* rescale, double* psum, float* probs);

// Lightning-indexer head sums for keys [k0, k1): for each key t,
//   acc = Σ_h (in head order, double) bf16(ReLU(bf16(q_h·k_t)) · w_h);  scores[t] = bf16(float(acc)).
// q: [n_heads, d], keys: [n_keys, d] (row stride d). Scalar: double dots; vector ISAs: fp32-lane dots.
using IndexerScoresFn = void (*)(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0,
                                 int64_t k1, const float* w, float* scores);

void attn_scores_scalar(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                        float scale, float* scores);
void attn_pv_scalar(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                    float* blocks);
void attn_rescale_scalar(float* acc, const float* block, int64_t d, float rescale);
void attn_output_scalar(const float* acc, int64_t d, float l, float* out);
void attn_softmax_scalar(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                         float* rescale, double* psum, float* probs);
void indexer_scores_scalar(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                           const float* w, float* scores);
#if defined(__x86_64__)
void attn_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                      float scale, float* scores);
void attn_pv_avx2(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                  float* blocks);
void attn_rescale_avx2(float* acc, const float* block, int64_t d, float rescale);
void attn_output_avx2(const float* acc, int64_t d, float l, float* out);
void attn_softmax_avx2(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                       float* rescale, double* psum, float* probs);
// out[i] = expf(x[i]) with the vector exp attn_softmax_avx2 uses (expf_avx2.inc; its test hook).
void exp_f32_avx2(const float* x, float* out, int64_t n);
// Integer dot products for FP4-like q and keys (indexer_int8_avx2.cc); anything else goes to the fp32 loop.
void indexer_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                         const float* w, float* scores);
void indexer_scores_avx2_fp32(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                              const float* w, float* scores);
// The integer path on packed index keys (core/kv_row.h), keys[t] the t-th key's bytes; a key outside the
// integer form takes its score from `fp32` on its decoded key. Returns false, writing nothing, when q is not
// of the integer form or the shape is beyond its buffers (head_dim > 512, more than 128 heads): the caller
// then scores the keys decoded.
bool indexer_scores_packed_avx2(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys, int64_t k0,
                                int64_t k1, const float* w, float* scores, IndexerScoresFn fp32);
// The integer paths' form of a vector (indexer_int8_avx2.cc): x[d] (d a multiple of 32, ≤ 512) as
// ints · 2^E_min, each 32-block being I · 2^E with |I| ≤ 15 and |E| ≤ 56 and its nonzero blocks at most
// kIndexerMaxShift binades apart, so that ints[d] = I · 2^(E − E_min) are bytes (|·| ≤ 120); scale = 2^E_min.
// False when x is not of that form. Also the AVX-512 integer path's q conversion (every AVX-512 CPU runs
// AVX2 code).
inline constexpr int kIndexerMaxShift = 3;
bool indexer_vector_to_ints_avx2(const float* x, int64_t d, int8_t* ints, float* scale);
// The integer path on AVX512_VNNI + VBMI (indexer_int8_avx512.cc; has_avx512_vnni_vbmi()) for packed keys:
// the AVX2 integer path's bits and contract, 16 keys × 8 heads per pass on VPDPBUSD (`fp32`: the tier's
// fp32-lane loop).
bool indexer_scores_packed_avx512vnni(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys,
                                      int64_t k0, int64_t k1, const float* w, float* scores, IndexerScoresFn fp32);
// The same path's converted 16-key groups for many queries (indexer.h indexer_prepare_packed): the lines n_keys
// keys take (0: a head_dim it does not take), the groups of keys [k0, k1) (k0 a multiple of 16) written at
// their place in `lines`, and the scores of keys [k0, k1) read from them (false as above).
int64_t indexer_prepared_lines_avx512vnni(int64_t n_keys, int64_t d);
void indexer_prepare_packed_avx512vnni(const uint8_t* const* keys, int64_t d, int64_t k0, int64_t k1,
                                       IndexerKeyLine* lines);
bool indexer_scores_prepared_avx512vnni(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys,
                                        const IndexerKeyLine* lines, int64_t k0, int64_t k1, const float* w,
                                        float* scores, IndexerScoresFn fp32);
void attn_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                        float scale, float* scores);
void attn_pv_avx512(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                    float* blocks);
void attn_rescale_avx512(float* acc, const float* block, int64_t d, float rescale);
void attn_output_avx512(const float* acc, int64_t d, float l, float* out);
void attn_softmax_avx512(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                         float* rescale, double* psum, float* probs);
void indexer_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                           const float* w, float* scores);
// VDPBF16PS, 32 keys × 8 heads per pass, for bf16-exact q and keys with every nonzero |value| ≥ 2^-56
// (attention_tiles_avx512bf16.cc); anything else goes to the AVX-512 loop.
void indexer_scores_avx512bf16(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                               const float* w, float* scores);
// AMX-BF16 tiles for bf16-exact (FP4-simulated) q and keys; anything else goes to the AVX-512 loop.
void indexer_scores_amx(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                        const float* w, float* scores);
#endif

// The sparse attention core's loops, always taken together from one ISA.
struct AttnTiles {
  AttnScoresFn scores;
  AttnPvFn pv;
  AttnRescaleFn rescale;
  AttnSoftmaxFn softmax;
  AttnOutputFn output;
};

// isa already resolved (kAmx: the AVX-512 loops, and AMX tiles for the indexer scores; kAvx512Bf16: the
// AVX-512 loops, and VDPBF16PS for the indexer scores).
AttnTiles attn_tiles_for(Isa isa);
IndexerScoresFn indexer_scores_for(Isa isa);

}  // namespace dsv4::kernels::detail
