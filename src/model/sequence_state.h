// model: the generation state of one sequence (spec §4): per layer (MTP included) the window rows, the
// compressed KV rows, the compressors' partial-block rows and the indexer keys — every one of them a
// page table over a pool of the model (model/kv_pages.h), so the whole state is budgeted in bytes, and
// copying a SequenceState shares pages instead of copying rows (copy-on-write). Created by
// Model::new_sequence(); the runtime owns it and passes it back to Model::forward.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_pages.h"

namespace dsv4 {

// One compressor's stream state (spec §2.5, §4).
struct CompressorState {
  // fp32 rows [kv | score + ape], [2·coff·dc] each, by absolute position; only the open block (and with
  // overlap the previous block) is held: a sliding table, align ratio, lag ratio (overlap) or 0.
  // Block −1 of the overlap does not exist (value 0, score −inf: spec §2.5) and is never stored.
  KvPageTable partial;
  // Finished entries (normed, RoPE'd, quant-simulated), n_entries of them: main rows as FP8, indexer
  // keys as packed FP4 (fp32 in a model configured with KvStorage::kF32 and in private states).
  KvPageTable rows;
  int64_t n_entries = 0;
};

struct LayerState {
  // Window rows [head_dim] by absolute position, FP8 like the compressed rows (the same grid: RoPE'd
  // bf16 tail, FP8-simulated nope dims); sliding: only the last window_size rows' pages are held.
  KvPageTable window;
  CompressorState compressor;   // main compressor (ratio > 0)
  CompressorState index_keys;   // indexer compressor (ratio == 4): the indexer keys
};

class SequenceState {
 public:
  int64_t n_tokens() const { return n_tokens_; }          // positions the main model has consumed
  int64_t n_mtp_tokens() const { return n_mtp_tokens_; }  // positions the MTP block has consumed

  // Model-internal: layer state (backbone layers, then MTP layers).
  std::vector<LayerState> layers;
  std::vector<LayerState> mtp_layers;
  int64_t n_tokens_ = 0;
  int64_t n_mtp_tokens_ = 0;
};

// Pages of one kind of state: in use (held by some sequence, a shared page once) and held (allocated:
// in use + free for reuse).
struct StatePoolUsage {
  int64_t pages_in_use = 0, pages_held = 0;
  int64_t bytes_in_use = 0, bytes_held = 0;
};

// Per-kind usage of a model's pools; the budget counts bytes_in_use() of all of them together.
struct StateMemory {
  StatePoolUsage window, main_rows, index_keys, partial;
  int64_t budget_bytes = 0;  // 0 = unlimited
  int64_t bytes_in_use() const {
    return window.bytes_in_use + main_rows.bytes_in_use + index_keys.bytes_in_use + partial.bytes_in_use;
  }
  int64_t bytes_held() const {
    return window.bytes_held + main_rows.bytes_held + index_keys.bytes_held + partial.bytes_held;
  }
};

// The pools a model's sequences live in, all drawing from one byte budget. Partial-block pools are
// keyed by row width and page rows (a page holds whole blocks' rows or a fraction dividing the block).
struct StatePools {
  std::shared_ptr<PageBudget> budget;
  std::shared_ptr<KvPagePool> window, main_rows, index_keys;
  std::vector<std::shared_ptr<KvPagePool>> partial;

  // The partial pool of that geometry; created (on this budget) when missing.
  std::shared_ptr<KvPagePool> partial_pool(int64_t dims, int32_t page_rows);
  StateMemory usage() const;
};

}  // namespace dsv4
