// model/deepseek_v4: the streaming gated-pooling compressor (spec §2.5, §4). Tokens are fed in position
// order; a compressed entry is emitted as soon as its block is complete, so one-shot prefill, chunked
// prefill and decode build exactly the same entries.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scratch.h"
#include "model/sequence_state.h"
#include "model/weights.h"
#include "model/deepseek_v4/linear.h"

namespace dsv4::v4 {

enum class CompressorKind {
  kMain,     // attention KV: FP8 simulation of the non-rope dims in 64-blocks
  kIndexer,  // indexer keys: Hadamard rotation, then FP4 simulation of all dims in 32-blocks
};

// Binds st's tables to the pools (partial rows fp32 in pages of partial_page_rows(ratio); entries in
// pools->main_rows or pools->index_keys by kind); pools == nullptr: private unbudgeted fp32 pools (the
// teacher, tests).
void compressor_init(const CompressorWeights& w, CompressorKind kind, StatePools* pools, CompressorState* st);
// Rows per partial page: the largest divisor of the ratio up to 16, so pages never straddle blocks and a
// copy-on-write copies at most 15 rows.
int32_t partial_page_rows(int64_t ratio);

// The compressor's two projections of x[n, dim] (fp32 GEMMs): kv, score [n, coff·dc] each. Rows are
// independent, so a batch projects every sequence's rows at once and each sequence consumes its own.
struct CompressorProjection {
  ScratchVec<float> kv, score;  // [n, width] each
};
void compressor_project(const Execution& ex, const CompressorWeights& w, const float* x, int64_t n,
                        CompressorProjection* p);
// The same two projections as jobs for linear_jobs (p sized for n rows here), so a caller can run them in
// one dispatch with its other projections of x.
void compressor_project_jobs(const CompressorWeights& w, const float* x, int64_t n, CompressorProjection* p,
                             std::vector<LinearJob>* jobs);

// Streams n projected rows (row0.. of p) at positions start..start+n−1 into the state's partial rows,
// emitting completed entries as compressor_feed does.
void compressor_consume(const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                        const std::vector<float>& rope_freqs, CompressorState* st, const CompressorProjection& p,
                        int64_t row0, int64_t start, int64_t n);

// Feeds x[n, dim] (bf16 values) at positions start..start+n−1; appends completed entries to st->rows.
void compressor_feed(const Execution& ex, const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                     const std::vector<float>& rope_freqs, CompressorState* st, const float* x, int64_t start,
                     int64_t n);

}  // namespace dsv4::v4
