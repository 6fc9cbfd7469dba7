// model: random checkpoints in the exact official on-disk format (spec §3, §6) for tests and demos:
// HF config.json + inference/config.json, sharded safetensors + index, weights drawn per tensor row
// from a seeded generator and run through the exact FP8 (128x128, ue8m0) and FP4 (per-32) quantizers.
// Magnitudes follow the golden tiny checkpoint so activations stay O(1). Generation streams tensor by
// tensor (never the whole model in memory) on a few threads; the bytes depend only on (config, seed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/model_config.h"
#include "model/tensor_layout.h"

namespace dsv4 {

// "tiny": spec §6 (vocab 129280, so real text works); "small": d 1024, 8 layers, 16 experts top-4;
// "medium": real V4-Flash layer dims, 8 layers, 64 experts top-6. All cover SWA, CSA and HCA.
Result<ModelConfig> make_tiny_preset(std::string_view name);

// The HF config.json (official field names) and inference/config.json (ModelArgs names) for cfg.
std::string hf_config_json(const ModelConfig& cfg);
std::string inference_config_json(const ModelConfig& cfg);

// Logical [rows, cols] of a weight as drawn, before quantization (FP4: the unpacked width). 1-D
// tensors are one row.
struct DrawShape {
  uint64_t rows = 1;
  uint64_t cols = 1;
};
DrawShape draw_shape(const ExpectedTensor& t);
// The pre-quantization values of rows [row_begin, row_end) of a float-valued tensor (not a scale, not
// tid2eid): row-major [row_end - row_begin, cols]. Each row has its own generator seeded from
// (seed, tensor name, row), so any slicing or threading gives the same values.
std::vector<float> draw_rows(const ExpectedTensor& t, uint64_t seed, uint64_t row_begin, uint64_t row_end);
// tid2eid rows: n_activated distinct expert ids in [0, n_routed) per token.
std::vector<int64_t> draw_tid2eid_rows(const ExpectedTensor& t, int64_t n_routed, uint64_t seed, uint64_t row_begin,
                                       uint64_t row_end);

struct MakeTinyOptions {
  uint64_t seed = 1;
  int n_threads = 2;
  uint64_t max_shard_bytes = 2ull << 30;   // official shards are ~3.5 GB; 2 GiB keeps tiny ones small
  int min_shards = 2;                      // always exercise the sharded path, like the goldens
  std::filesystem::path tokenizer_dir;     // copied when present and the vocab fits; empty = skip
};

struct MakeTinyReport {
  uint64_t n_tensors = 0;
  uint64_t bytes = 0;
  int n_shards = 0;
  double seconds = 0;
  bool tokenizer_copied = false;
  std::string note;  // why the tokenizer was skipped, if it was
};

// Writes the whole model directory. OUT must not already hold a model (config.json).
Result<MakeTinyReport> make_tiny_checkpoint(const ModelConfig& cfg, const std::filesystem::path& out,
                                            const MakeTinyOptions& opt);

}  // namespace dsv4
