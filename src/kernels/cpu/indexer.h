// kernels: the lightning indexer on the CPU (spec §2.6): the score of every visible compressed key for
// one query, and the top-k selection with the reference's tie rule.
//
//   scores[t] = bf16(Σ_h bf16(ReLU(bf16(q_h·k_t)) · w_h))   (the head sum in double, in head order)
//
// Numerics against ref::indexer_scores (tests/unit/kernel_indexer_test.cc checks both):
//  * Isa::kScalar: double dots in index order, bit-identical always.
//  * Vector ISAs: each q_h·k_t is summed in fp32 lanes; every later step is the reference's. In the model
//    q and k are FP4-simulated (E2M1 × power-of-two scale per 32-block): all their products are multiples
//    of 2^(e_min−2) below 36·2^e_max, so with head_dim = 128 every partial sum is exact in fp32 whenever
//    the 32-block scale exponents of q_h and k_t (summed per block) span at most 9 binades, and the
//    scores are then bit-identical in any summation order. Outside that condition (or for arbitrary
//    floats) a head term may move by one bf16 ulp: |score − ref| ≤ 2^-7·Σ_h |term_h| + 2^-7·|ref|.
//  * Isa::kAvx2 runs each dot as one exact integer (vpmaddubsw, indexer_int8_avx2.cc) when q_h and the key
//    are I · 2^E per 32-block with |I| ≤ 15 and their nonzero blocks at most 3 binades apart (FP4-simulated,
//    Hadamard-rotated vectors are): bit-identical to the reference then, with no condition on the binades'
//    spread. A q outside that form takes the fp32 loop for the call, a key for itself alone.
//  * Isa::kAvx512Bf16 runs the dots on VDPBF16PS (32 keys × 8 heads per pass, keys in lanes) when q and a
//    32-key group are exact in bf16 with every nonzero |value| ≥ 2^-56 (so its DAZ/FTZ never acts); each
//    dot is then an fp32 sum in one documented order (attention_tiles_avx512bf16.cc, emulated bit for bit
//    by the tests), the same exactness argument applying; a q or group outside that takes the fp32 loop
//    (a bf16 refusal).
//  * Isa::kAmx runs the dots on AMX-BF16 tiles (fp32 accumulation) when q and a 16-key group are exact in
//    bf16 (FP4-simulated values are), the same exactness argument applying; other groups take the fp32
//    loop.
//
// topk_desc returns the k largest scores in descending order with ties to the lower index — exactly the
// reference's stable descending sort (golden README contract item 2) for any input without NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/sparse_attention.h"

namespace dsv4::kernels {

// q [n_heads, head_dim] (after RoPE, Hadamard and FP4 simulation); keys [n_keys, head_dim];
// w [n_heads] (bf16 head weights, already scaled); scores [n_keys]. Keys are split across opt.pool.
void indexer_scores(const float* q, int64_t n_heads, int64_t head_dim, const float* keys, int64_t n_keys,
                    const float* w, float* scores, const AttentionOptions& opt);

// The same scores from keys stored packed (core/kv_row.h index keys: E2M1 codes, then one E8M0 scale per 32
// dims; the model's storage): keys[t] points at key t's index_key_bytes(head_dim) bytes. Isa::kAvx2 and the
// AVX-512 tiers (kAmx included) read the codes directly, no fp32 copy of any key (~8x less key memory per
// call): on VPDPBUSD where the CPU has VNNI and VBMI, else on AVX2's integer path. The scalar tier decodes
// the keys of each pool chunk, 256 at a time, into per-thread scratch. Bit-identical to indexer_scores on
// the decoded keys, except that the exact integer dots can differ from the float loops' where those are
// inexact (block scales more than 9 binades apart: the bullets above).
void indexer_scores_packed(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                           int64_t n_keys, const float* w, float* scores, const AttentionOptions& opt);
// Whether indexer_scores_packed reads the codes directly on `isa` (else it decodes the keys on every call:
// a caller scoring many queries against one key set then decodes once and calls indexer_scores).
bool indexer_reads_packed_keys(Isa isa);

// Many queries against one packed key set (prefill: query i sees a prefix of the keys): on the ISAs that
// score packed keys through a converted form (the AVX-512 tiers' VNNI path), the keys converted once into
// `lines` instead of once per query. indexer_prepared_lines is how many lines n_keys keys take (0: this ISA
// or head_dim has no such form: call indexer_scores_packed per query instead); indexer_prepare_packed fills
// them (keys split across opt.pool); indexer_scores_prepared then gives indexer_scores_packed's scores of keys
// [0, n_visible) bit for bit, for any n_visible ≤ n_prepared (the n_keys prepared; checked). `keys` must stay valid: a key the
// integer path does not take, or a q it does not take, is scored from its row.
struct alignas(64) IndexerKeyLine {
  uint8_t bytes[64];
};
int64_t indexer_prepared_lines(int64_t n_keys, int64_t head_dim, Isa isa);
void indexer_prepare_packed(const uint8_t* const* keys, int64_t n_keys, int64_t head_dim, IndexerKeyLine* lines,
                            const AttentionOptions& opt);
void indexer_scores_prepared(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                             const IndexerKeyLine* lines, int64_t n_prepared, int64_t n_visible, const float* w,
                             float* scores, const AttentionOptions& opt);

// Working memory of topk_desc, reused across calls.
struct TopkScratch {
  std::vector<uint32_t> keys;
  std::vector<int32_t> picked, tied;
  std::vector<uint64_t> order;
  std::vector<uint32_t> hist;
};

// The k largest of scores[n] in descending order, equal scores to the lower index; k ≤ n. O(n + k log k):
// a radix select on the order-preserving 32-bit image of each score (two passes over all n), then a sort
// of the k picked.
void topk_desc(const float* scores, int64_t n, int64_t k, int32_t* out, TopkScratch& scratch);

}  // namespace dsv4::kernels
