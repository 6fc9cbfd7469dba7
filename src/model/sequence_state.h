// model: the generation state of one sequence (spec §4): per layer (MTP included) the window ring, the
// compressed KV rows, the compressors' partial-block state and the indexer keys. Created by
// Model::new_sequence(); the runtime owns it and passes it back to Model::forward.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_pages.h"

namespace dsv4 {

// One compressor's stream state (spec §2.5, §4). Rows hold fp32 kv and score (+ape) of the tokens of
// the current, still incomplete block at slot pos % ratio; with overlap also the previous block's rows.
struct CompressorState {
  std::vector<float> kv, score;            // [ratio, coff·dc]
  std::vector<float> prev_kv, prev_score;  // [ratio, coff·dc]; overlap only (score −inf before block 0)
  // Finished entries (normed, RoPE'd, quant-simulated), n_entries of them: in `rows` when it is bound to
  // a page pool (every state Model::new_sequence makes: main rows as FP8, indexer keys as packed FP4,
  // pages shared through the model's pools); otherwise (states built outside a Model) fp32 in
  // `entries` [n_entries, dc].
  KvPageTable rows;
  std::vector<float> entries;
  int64_t n_entries = 0;

  // Entry t as dc floats: decoded into `scratch` [dc] from the pages, or read in place.
  const float* entry(int64_t t, float* scratch) const {
    if (!rows.bound()) return entries.data() + t * static_cast<int64_t>(entries.size() / static_cast<size_t>(n_entries));
    rows.read(t, scratch);
    return scratch;
  }
};

struct LayerState {
  std::vector<float> window;    // [window_size, head_dim] ring: position P lives in slot P % window_size
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

}  // namespace dsv4
