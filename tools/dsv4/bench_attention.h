// tools: the attention section of `dsv4 bench` — per-token cost of one compressed-sparse-attention (CSA)
// layer at growing contexts against dense attention over every raw row, on the attention kernels with
// synthetic state of the model's shapes (so it runs without a fast forward pass).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_compute.h"
#include "io/model_config.h"
#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::cli::bench {

struct AttentionBenchShape {
  int64_t n_heads = 64, head_dim = 512, window = 128;            // main attention (V4-Flash defaults)
  int64_t rope_dims = 64;                                        // the stored rows' bf16 RoPE tail (core/kv_row.h)
  int64_t index_heads = 64, index_head_dim = 128, index_topk = 512;
  int64_t ratio = 4;                                             // the CSA layers' compression ratio
};

// The shape of `cfg`'s first CSA layer (ratio of the first compressed-sparse layer; 4 if it has none).
AttentionBenchShape attention_shape(const ModelConfig& cfg);

// For each context: the CSA layer's per-token time (indexer scores over context/ratio keys, top-k, decoding
// the rows it reads from the FP8 storage the model keeps them in — the window's window − 1 earlier rows and
// the top-k compressed rows, as attention.cc does per decoded token — and sparse attention over window +
// top-k rows) and dense attention's (all `context` rows, as floats), each the fastest of its
// calls (the attention figures are compared as ratios across contexts). The CSA calls go round-robin over the
// contexts for min_time per context, so that all of them see the same stretch of a shared host; dense
// attention runs min_time per context after them. Prints a table unless `quiet`; returns the JSON section.
//
// With `peaks` (this run's compute probes), also each context's arithmetic floor: the core's q·k and P·V
// (4·H·D flops per row attended) at the peak of the FMA its tiles run on, plus the indexer's dots (2 · index
// heads · index dim integer ops per key) at VPDPBUSD's peak (where the indexer runs on it), all of the
// pool's threads at once — what no kernel on this machine can beat, and so the best 64K / 4K ratio it
// allows; each measured part is also given as a fraction of its floor.
nlohmann::json bench_attention(const AttentionBenchShape& s, const std::vector<int64_t>& contexts, double min_time,
                               kernels::Isa isa, ThreadPool* pool, bool quiet, const ComputePeaks* peaks = nullptr);

}  // namespace dsv4::cli::bench
