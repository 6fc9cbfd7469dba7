// io: the model's hyper-parameters, parsed from an HF config.json (and inference/config.json when
// present). Field names follow the reference's ModelArgs; parse_model_config validates every constraint
// the forward pass relies on (spec §1, §6) and returns a clear error otherwise.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dsv4 {

enum class AttentionKind { kSlidingWindow, kCompressedSparse, kHeavilyCompressed };
std::string_view attention_kind_name(AttentionKind k);  // "swa", "csa", "hca"

struct ModelConfig {
  std::string model_type = "deepseek_v4";
  int64_t vocab_size = 0;
  int64_t dim = 0;             // hidden_size (d_model)
  int64_t moe_inter_dim = 0;   // moe_intermediate_size
  int64_t n_layers = 0;        // num_hidden_layers (backbone blocks)
  int64_t n_hash_layers = 0;   // first layers routed by tid2eid
  int64_t n_mtp_layers = 1;    // April: 1 MTP block; 0731 DSpark: 3 stages
  int64_t n_heads = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t n_activated_experts = 0;  // num_experts_per_tok
  std::string score_func = "sqrtsoftplus";
  double route_scale = 1.0;   // routed_scaling_factor
  double swiglu_limit = 0.0;  // 0 = no clamp
  int64_t q_lora_rank = 0;
  int64_t head_dim = 0;
  int64_t rope_head_dim = 0;  // qk_rope_head_dim
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t window_size = 0;  // sliding_window
  std::vector<int64_t> compress_ratios;  // n_layers + n_mtp_layers entries
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  int64_t original_seq_len = 0;  // rope_scaling.original_max_position_embeddings
  double rope_factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  std::string expert_dtype = "fp4";  // "fp4" or "fp8"
  // 0731 DSpark (present only when n_mtp_layers > 1 with dspark fields).
  int64_t dspark_block_size = 0;
  int64_t dspark_markov_rank = 0;
  int64_t dspark_noise_token_id = -1;
  std::vector<int64_t> dspark_target_layer_ids;

  bool has_dspark() const { return dspark_block_size > 0; }
  int64_t n_total_layers() const { return n_layers + n_mtp_layers; }
  int64_t compress_ratio(int64_t il) const { return compress_ratios.at(static_cast<size_t>(il)); }
  AttentionKind attention_kind(int64_t il) const;
  bool is_hash_layer(int64_t il) const { return il < n_hash_layers; }
  int64_t nope_head_dim() const { return head_dim - rope_head_dim; }
};

// Parses and validates an HF-style config.json text. `source` names the file in error messages.
Result<ModelConfig> parse_model_config(std::string_view json_text, std::string_view source);
// Loads DIR/config.json (or a config.json path), overlaying inference/config.json fields that HF omits
// (n_mtp_layers, dspark_*) when that file exists.
Result<ModelConfig> load_model_config(const std::filesystem::path& dir_or_file);
// Every constraint of spec §6 and the size limits an engine relies on; also run by parse.
Status validate_model_config(const ModelConfig& cfg, std::string_view source);

}  // namespace dsv4
