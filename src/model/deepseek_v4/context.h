// model/deepseek_v4: what every module needs besides its weights: the config, the two RoPE tables
// (spec §2.0: base rope_theta without YaRN for ratio-0 layers; compress_rope_theta with YaRN otherwise)
// and how linears run (backend, thread pool, ISA).
#pragma once

#include <vector>

#include "io/model_config.h"
#include "model/deepseek_v4/execution.h"
#include "ops/reference/mhc.h"

namespace dsv4::v4 {

struct ModelContext {
  ModelConfig cfg;
  std::vector<float> rope_window;      // [rope_dim/2] frequencies for ratio-0 layers (and MTP)
  std::vector<float> rope_compressed;  // [rope_dim/2] for ratio > 0 layers, their compressor and indexer
  Execution exec;                      // set by Model::load

  static ModelContext make(const ModelConfig& cfg);
  const std::vector<float>& rope_for_layer(int64_t il) const {
    return cfg.compress_ratio(il) > 0 ? rope_compressed : rope_window;
  }
  ref::HcParams hc_params() const;
};

}  // namespace dsv4::v4
