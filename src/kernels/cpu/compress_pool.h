// kernels: the compressor's gated pooling of one compressed entry (spec §2.5) —
//   out[ch] = Σ_c softmax_c(score[c, ch]) · kv[c, ch], softmax per channel over the n_cand candidates —
// vectorised across channels (16 per step), reading the candidates where the streaming state holds them
// (row pointers: the overlap layout's two half-blocks need no gather copy), with no allocation once warm.
//
// Numerics: each channel runs ref::compress_pool's exact sequence — fp32 max, fp32 std::exp of
// (score − max) (scalar libm calls: a vector exp would round differently), the candidates' sum in double in
// candidate order, s = fp32(sum), fp32 e/s and kv·(e/s), the products summed in double in candidate order —
// so the output is bit-identical to the reference on every ISA (tests/unit/kernel_compress_pool_test.cc).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels {

// kv_rows[c], score_rows[c]: candidate c's dc channel values (scores include the ape bias; −inf marks an
// absent candidate, whose weight is exactly 0). out: [dc] fp32 (the caller rounds to bf16).
void compress_pool(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc, float* out,
                   Isa isa = Isa::kAuto);

namespace detail {
inline constexpr int kPoolLanes = 16;  // channels per step
// One ISA's body: channels [0, dc); e: scratch [n_cand, kPoolLanes].
using CompressPoolFn = void (*)(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc,
                                float* out, float* e);
void compress_pool_scalar(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc,
                          float* out, float* e);
void compress_pool_avx2(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc,
                        float* out, float* e);
void compress_pool_avx512(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc,
                          float* out, float* e);
}  // namespace detail

}  // namespace dsv4::kernels
