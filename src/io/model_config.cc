// io: config.json -> ModelConfig. Accepts the HF names (config.json) and the reference's ModelArgs names
// (inference/config.json); validation lives in validate_model_config.
#include "io/model_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/strict_json.h"

namespace dsv4 {
namespace {

using nlohmann::json;

constexpr size_t kMaxConfigBytes = 1 << 20;  // a config.json is a few KB; refuse anything huge
constexpr int kMaxConfigJsonDepth = 16;

std::string src_msg(std::string_view source, const std::string& what) {
  return std::string(source) + ": " + what;
}

// Reads an integer field that may be absent (keeps the default). Wrong types are errors.
Status read_int(const json& j, const char* key, int64_t& out, std::string_view source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return invalid_file("config.range", src_msg(source, std::string("field '") + key + "' does not fit 64 bits"));
  if (it->is_number_integer()) {
    out = it->get<int64_t>();
    return Status::ok();
  }
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out = static_cast<int64_t>(d);
      return Status::ok();
    }
  }
  return invalid_file("config.type", src_msg(source, std::string("field '") + key + "' must be an integer"));
}

Status read_double(const json& j, const char* key, double& out, std::string_view source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number())
    return invalid_file("config.type", src_msg(source, std::string("field '") + key + "' must be a number"));
  out = it->get<double>();
  if (!std::isfinite(out))
    return invalid_file("config.range",
                        src_msg(source, std::string("field '") + key +
                                            "' is not finite"));  // defensive: the parser already rejects 1e999
  return Status::ok();
}

Status read_string(const json& j, const char* key, std::string& out, std::string_view source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_string())
    return invalid_file("config.type", src_msg(source, std::string("field '") + key + "' must be a string"));
  out = it->get<std::string>();
  return Status::ok();
}

Status read_int_list(const json& j, const char* key, std::vector<int64_t>& out, std::string_view source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || it->size() > 4096)
    return invalid_file("config.type", src_msg(source, std::string("field '") + key + "' must be a list of integers"));
  out.clear();
  for (const auto& v : *it) {
    if (!v.is_number_integer())
      return invalid_file("config.type", src_msg(source, std::string("field '") + key + "' must hold integers"));
    out.push_back(v.get<int64_t>());
  }
  return Status::ok();
}

// Reference (inference/config.json) names; also accepted in the HF file for robustness.
Status read_inference_names(const json& j, ModelConfig& c, std::string_view s) {
  DSV4_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "dim", c.dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "moe_inter_dim", c.moe_inter_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_layers", c.n_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_hash_layers", c.n_hash_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_mtp_layers", c.n_mtp_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_heads", c.n_heads, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_routed_experts", c.n_routed_experts, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_shared_experts", c.n_shared_experts, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "n_activated_experts", c.n_activated_experts, s));
  DSV4_RETURN_IF_ERROR(read_string(j, "score_func", c.score_func, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "route_scale", c.route_scale, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "swiglu_limit", c.swiglu_limit, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "q_lora_rank", c.q_lora_rank, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "head_dim", c.head_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "rope_head_dim", c.rope_head_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "o_groups", c.o_groups, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "o_lora_rank", c.o_lora_rank, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "window_size", c.window_size, s));
  DSV4_RETURN_IF_ERROR(read_int_list(j, "compress_ratios", c.compress_ratios, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "rope_theta", c.rope_theta, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "compress_rope_theta", c.compress_rope_theta, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "original_seq_len", c.original_seq_len, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "rope_factor", c.rope_factor, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "beta_fast", c.beta_fast, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "beta_slow", c.beta_slow, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "index_n_heads", c.index_n_heads, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "index_head_dim", c.index_head_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "index_topk", c.index_topk, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "hc_mult", c.hc_mult, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "hc_sinkhorn_iters", c.hc_sinkhorn_iters, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "hc_eps", c.hc_eps, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "norm_eps", c.norm_eps, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "max_seq_len", c.max_position_embeddings, s));
  DSV4_RETURN_IF_ERROR(read_string(j, "expert_dtype", c.expert_dtype, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "dspark_block_size", c.dspark_block_size, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "dspark_markov_rank", c.dspark_markov_rank, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "dspark_noise_token_id", c.dspark_noise_token_id, s));
  DSV4_RETURN_IF_ERROR(read_int_list(j, "dspark_target_layer_ids", c.dspark_target_layer_ids, s));
  return Status::ok();
}

Status read_hf_names(const json& j, ModelConfig& c, std::string_view s) {
  DSV4_RETURN_IF_ERROR(read_string(j, "model_type", c.model_type, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "hidden_size", c.dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_inter_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "num_hash_layers", c.n_hash_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "num_nextn_predict_layers", c.n_mtp_layers, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_activated_experts, s));
  DSV4_RETURN_IF_ERROR(read_string(j, "scoring_func", c.score_func, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "routed_scaling_factor", c.route_scale, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "qk_rope_head_dim", c.rope_head_dim, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "sliding_window", c.window_size, s));
  DSV4_RETURN_IF_ERROR(read_double(j, "rms_norm_eps", c.norm_eps, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", c.max_position_embeddings, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "bos_token_id", c.bos_token_id, s));
  DSV4_RETURN_IF_ERROR(read_int(j, "eos_token_id", c.eos_token_id, s));
  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    if (!rs->is_object()) return invalid_file("config.type", src_msg(s, "'rope_scaling' must be an object"));
    DSV4_RETURN_IF_ERROR(read_double(*rs, "factor", c.rope_factor, s));
    DSV4_RETURN_IF_ERROR(read_int(*rs, "original_max_position_embeddings", c.original_seq_len, s));
    DSV4_RETURN_IF_ERROR(read_double(*rs, "beta_fast", c.beta_fast, s));
    DSV4_RETURN_IF_ERROR(read_double(*rs, "beta_slow", c.beta_slow, s));
  }
  return Status::ok();
}

Result<std::string> read_small_file(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec) return not_found("config.missing", p.string() + ": cannot read (" + ec.message() + ")");
  if (size > kMaxConfigBytes)
    return invalid_file("config.too_large",
                        p.string() + ": " + std::to_string(size) + " bytes exceeds the 1 MiB limit");
  std::ifstream f(p, std::ios::binary);
  if (!f) return io_error("config.open", p.string() + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<json> parse_object(std::string_view text, std::string_view source) {
  if (text.size() > kMaxConfigBytes)
    return invalid_file("config.too_large",
                        src_msg(source, std::to_string(text.size()) + " bytes exceeds the 1 MiB limit"));
  StrictJson parsed = parse_strict_json(text, kMaxConfigJsonDepth);
  switch (parsed.error) {
    case StrictJson::Error::kNone:
      break;
    case StrictJson::Error::kTooDeep:
      return invalid_file("config.json_too_deep",
                          src_msg(source, "JSON nesting deeper than " + std::to_string(kMaxConfigJsonDepth)));
    case StrictJson::Error::kSyntax:
      return invalid_file("config.json_syntax", src_msg(source, "not valid JSON"));
    case StrictJson::Error::kDuplicateKey:
      return invalid_file("config.duplicate_key",
                          src_msg(source, "key '" + parsed.duplicate_key + "' appears twice in one object"));
  }
  if (!parsed.value.is_object())
    return invalid_file("config.json_shape", src_msg(source, "top level is not a JSON object"));
  return std::move(parsed.value);
}

}  // namespace

std::string_view attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kSlidingWindow:
      return "swa";
    case AttentionKind::kCompressedSparse:
      return "csa";
    case AttentionKind::kHeavilyCompressed:
      return "hca";
  }
  return "?";
}

AttentionKind ModelConfig::attention_kind(int64_t il) const {
  const int64_t r = compress_ratio(il);
  if (r == 0) return AttentionKind::kSlidingWindow;
  if (r == 4) return AttentionKind::kCompressedSparse;
  return AttentionKind::kHeavilyCompressed;
}

Result<ModelConfig> parse_model_config(std::string_view json_text, std::string_view source) {
  DSV4_ASSIGN_OR_RETURN(json j, parse_object(json_text, source));
  ModelConfig c;
  c.n_mtp_layers = 1;
  DSV4_RETURN_IF_ERROR(read_inference_names(j, c, source));
  DSV4_RETURN_IF_ERROR(read_hf_names(j, c, source));
  DSV4_RETURN_IF_ERROR(validate_model_config(c, source));
  return c;
}

Result<ModelConfig> load_model_config(const std::filesystem::path& dir_or_file) {
  std::filesystem::path cfg_path = dir_or_file;
  std::error_code ec;
  if (std::filesystem::is_directory(dir_or_file, ec)) cfg_path = dir_or_file / "config.json";
  DSV4_ASSIGN_OR_RETURN(std::string text, read_small_file(cfg_path));
  DSV4_ASSIGN_OR_RETURN(json j, parse_object(text, cfg_path.string()));
  ModelConfig c;
  DSV4_RETURN_IF_ERROR(read_inference_names(j, c, cfg_path.string()));
  DSV4_RETURN_IF_ERROR(read_hf_names(j, c, cfg_path.string()));
  // inference/config.json carries what HF's file lacks or says vestigially (n_mtp_layers, dspark_*).
  const auto inf_path = cfg_path.parent_path() / "inference" / "config.json";
  if (std::filesystem::exists(inf_path, ec)) {
    DSV4_ASSIGN_OR_RETURN(std::string inf_text, read_small_file(inf_path));
    DSV4_ASSIGN_OR_RETURN(json inf, parse_object(inf_text, inf_path.string()));
    for (const char* key : {"n_mtp_layers", "dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id"}) {
      if (inf.contains(key)) {
        int64_t* field = std::string_view(key) == "n_mtp_layers"         ? &c.n_mtp_layers
                         : std::string_view(key) == "dspark_block_size"  ? &c.dspark_block_size
                         : std::string_view(key) == "dspark_markov_rank" ? &c.dspark_markov_rank
                                                                         : &c.dspark_noise_token_id;
        DSV4_RETURN_IF_ERROR(read_int(inf, key, *field, inf_path.string()));
      }
    }
    DSV4_RETURN_IF_ERROR(read_int_list(inf, "dspark_target_layer_ids", c.dspark_target_layer_ids, inf_path.string()));
  }
  DSV4_RETURN_IF_ERROR(validate_model_config(c, cfg_path.string()));
  return c;
}

Status validate_model_config(const ModelConfig& c, std::string_view s) {
  // Each constraint has its own rule id so callers and tests can tell them apart.
  auto bad = [&](const char* rule, const std::string& what) { return invalid_file(rule, src_msg(s, what)); };
  if (c.model_type != "deepseek_v4")
    return bad("config.model_type", "unsupported model_type '" + c.model_type + "' (this engine runs deepseek_v4)");
  struct Positive {
    const char* name;
    int64_t v;
    int64_t max;
  };
  const Positive positives[] = {
      {"vocab_size", c.vocab_size, 1 << 24},
      {"hidden_size", c.dim, 1 << 16},
      {"moe_intermediate_size", c.moe_inter_dim, 1 << 16},
      {"num_hidden_layers", c.n_layers, 1024},
      {"num_attention_heads", c.n_heads, 1024},
      {"n_routed_experts", c.n_routed_experts, 1 << 14},
      {"num_experts_per_tok", c.n_activated_experts, 1 << 10},
      {"q_lora_rank", c.q_lora_rank, 1 << 16},
      {"head_dim", c.head_dim, 1 << 14},
      {"qk_rope_head_dim", c.rope_head_dim, 1 << 12},
      {"o_groups", c.o_groups, 1024},
      {"o_lora_rank", c.o_lora_rank, 1 << 16},
      {"sliding_window", c.window_size, 1 << 20},
      {"hc_mult", c.hc_mult, 64},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters, 1000},
      {"original_max_position_embeddings", c.original_seq_len, int64_t{1} << 32},
  };
  for (const auto& p : positives)
    if (p.v <= 0 || p.v > p.max)
      return bad("config.range", std::string(p.name) + " = " + std::to_string(p.v) + " is out of range (1.." +
                                     std::to_string(p.max) + ")");
  if (c.n_shared_experts < 0 || c.n_shared_experts > 64)
    return bad("config.shared_experts", "n_shared_experts out of range (0..64)");
  if (c.n_hash_layers < 0 || c.n_hash_layers > c.n_layers)
    return bad("config.hash_layers", "num_hash_layers must be in 0..num_hidden_layers");
  if (c.n_mtp_layers < 0 || c.n_mtp_layers > 16) return bad("config.mtp_layers", "n_mtp_layers out of range (0..16)");
  if (c.n_activated_experts > c.n_routed_experts)
    return bad("config.experts_per_tok", "num_experts_per_tok = " + std::to_string(c.n_activated_experts) +
                                             " exceeds n_routed_experts = " + std::to_string(c.n_routed_experts));
  // FP8 activations are quantized in 1x128 K-blocks (spec §3), so every FP8/FP4 GEMM's K is a multiple of
  // 128; FP4 expert scales (32-element blocks) are then aligned as well.
  if (c.dim % 128 != 0) return bad("config.hidden_block", "hidden_size must be a multiple of 128 (FP8 block size)");
  if (c.moe_inter_dim % 128 != 0)
    return bad("config.moe_inter_block", "moe_intermediate_size must be a multiple of 128");
  if (c.q_lora_rank % 128 != 0) return bad("config.q_lora_block", "q_lora_rank must be a multiple of 128");
  if (c.rope_head_dim % 2 != 0 || c.rope_head_dim > c.head_dim)
    return bad("config.rope_head_dim", "qk_rope_head_dim must be even and <= head_dim");
  if ((c.head_dim - c.rope_head_dim) % 64 != 0)
    return bad("config.nope_head_dim", "head_dim - qk_rope_head_dim must be a multiple of 64 (KV FP8 blocks)");
  if (c.n_heads % c.o_groups != 0) return bad("config.o_groups", "num_attention_heads must be divisible by o_groups");
  if ((c.n_heads * c.head_dim / c.o_groups) % 128 != 0)
    return bad("config.o_group_width", "o-group width must be a multiple of 128");
  if ((c.o_groups * c.o_lora_rank) % 128 != 0)
    return bad("config.o_lora_block", "o_groups * o_lora_rank must be a multiple of 128");
  if (static_cast<int64_t>(c.compress_ratios.size()) != c.n_layers + c.n_mtp_layers)
    return bad("config.compress_ratios_length", "compress_ratios has " + std::to_string(c.compress_ratios.size()) +
                                                    " entries; expected num_hidden_layers + n_mtp_layers = " +
                                                    std::to_string(c.n_layers + c.n_mtp_layers));
  bool any_csa = false;
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    const int64_t r = c.compress_ratios[i];
    if (r < 0 || r == 1 || r > 1 << 16)
      return bad("config.compress_ratio_value", "compress_ratios[" + std::to_string(i) + "] = " + std::to_string(r) +
                                                    " is not 0 or a ratio in 2..65536");
    if (r == 4) any_csa = true;
    if (static_cast<int64_t>(i) >= c.n_layers && r != 0)
      return bad("config.mtp_compress_ratio",
                 "compress_ratios[" + std::to_string(i) + "]: MTP layers must have compress ratio 0");
  }
  if (any_csa) {
    if (c.index_n_heads <= 0 || c.index_n_heads > 1024)
      return bad("config.index_n_heads", "index_n_heads out of range (1..1024)");
    if (c.index_head_dim <= c.rope_head_dim || (c.index_head_dim & (c.index_head_dim - 1)) != 0 ||
        c.index_head_dim % 32 != 0)
      return bad("config.index_head_dim", "index_head_dim = " + std::to_string(c.index_head_dim) +
                                              " must be a power of two, > qk_rope_head_dim, a multiple of 32");
    if (c.index_topk <= 0 || c.index_topk > 1 << 20)
      return bad("config.index_topk", "index_topk out of range (1..2^20)");
  }
  if (c.score_func != "sqrtsoftplus" && c.score_func != "softmax" && c.score_func != "sigmoid")
    return bad("config.score_func", "unknown scoring_func '" + c.score_func + "'");
  if (c.expert_dtype != "fp4" && c.expert_dtype != "fp8")
    return bad("config.expert_dtype", "expert_dtype must be fp4 or fp8");
  if (!(c.rope_theta > 0) || !(c.compress_rope_theta > 0) || !(c.rope_factor >= 1.0) || !(c.beta_fast > 0) ||
      !(c.beta_slow > 0))
    return bad("config.rope", "rope parameters out of range (thetas and betas > 0, factor >= 1)");
  if (!(c.norm_eps > 0) || !(c.hc_eps >= 0)) return bad("config.eps", "eps values out of range");
  if (!(c.swiglu_limit >= 0)) return bad("config.swiglu_limit", "swiglu_limit must be >= 0 (0 = no clamp)");
  if (!(c.route_scale > 0)) return bad("config.route_scale", "routed_scaling_factor must be > 0");
  if (c.vocab_size <= c.bos_token_id || c.vocab_size <= c.eos_token_id || c.bos_token_id < 0 || c.eos_token_id < 0)
    return bad("config.token_ids", "bos/eos token ids must be inside the vocabulary");
  if (c.dspark_block_size < 0 || c.dspark_block_size > 64)
    return bad("config.dspark", "dspark_block_size out of range (0..64)");
  if (c.has_dspark()) {
    if (c.dspark_markov_rank <= 0 || c.dspark_markov_rank > 1 << 16)
      return bad("config.dspark", "dspark_markov_rank out of range (1..65536)");
    if (c.dspark_noise_token_id < 0 || c.dspark_noise_token_id >= c.vocab_size)
      return bad("config.dspark", "dspark_noise_token_id must be inside the vocabulary");
    if (c.dspark_target_layer_ids.empty() || c.dspark_target_layer_ids.size() > 64)
      return bad("config.dspark", "dspark_target_layer_ids must list 1..64 layers");
    for (int64_t id : c.dspark_target_layer_ids)
      if (id < 0 || id >= c.n_layers)
        return bad("config.dspark", "dspark_target_layer_ids holds " + std::to_string(id) + ", not a backbone layer");
  }
  return Status::ok();
}

}  // namespace dsv4
