// model: presets, config writers and the streaming random-checkpoint generator behind `dsv4 make-tiny`.
#include "model/make_tiny.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/formats.h"
#include "core/weight_quant.h"
#include "io/safetensors_writer.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// The official tokenizer's vocabulary (spec §1): smaller vocabularies cannot use tokenizer.json.
constexpr int64_t kOfficialVocab = 129280;
// Rows per generation chunk: one FP8 block row, so chunks quantize independently.
constexpr uint64_t kChunkRows = 128;

ModelConfig base_config() {
  ModelConfig c;
  c.vocab_size = kOfficialVocab;
  c.n_mtp_layers = 1;
  c.n_shared_experts = 1;
  c.score_func = "sqrtsoftplus";
  c.route_scale = 1.5;
  c.swiglu_limit = 10.0;
  c.rope_head_dim = 64;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.original_seq_len = 65536;
  c.rope_factor = 16;
  c.beta_fast = 32;
  c.beta_slow = 1;
  c.index_head_dim = 128;
  c.expert_dtype = "fp4";
  return c;
}

// ---- deterministic random numbers ----
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

class RowRng {
 public:
  RowRng(uint64_t seed, uint64_t name_hash, uint64_t row)
      : state_(splitmix64(seed ^ splitmix64(name_hash ^ splitmix64(row)))) {}
  uint64_t next() { return splitmix64(state_++); }
  // Approximately standard normal: Irwin–Hall sum of four 16-bit uniforms, scaled to unit variance.
  // One 64-bit draw per value (fast enough for multi-GB models); tails end at ±2√3, which suits weights.
  float normal() {
    const uint64_t x = next();
    const uint32_t sum = static_cast<uint32_t>((x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48));
    return (static_cast<float>(sum) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
  }
  uint64_t below(uint64_t n) { return next() % n; }  // bias < n / 2^64: irrelevant here

 private:
  uint64_t state_;
};

// Magnitudes measured on the golden tiny checkpoint (golden/tiny/checkpoint, decoded): linear weights
// are N(0, gain²/fan_in) with the gains below, norms 1 ± 0.1, hc_fn 1/sqrt(hc·d), mHC bases N(0,1)
// (hc_head 0.5), mHC scales 1 ± 0.2, sinks N(0,1), ape N(0, 0.25), gate bias N(0, 0.05²).
struct Init {
  float mean = 0.0f;
  float std = 1.0f;
};

Init init_for(const ExpectedTensor& t, uint64_t cols) {
  const float inv_sqrt = t.fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(t.fan_in)) : 1.0f;
  switch (t.role) {
    case TensorRole::kEmbedding: return {0.0f, 1.0f};
    case TensorRole::kHead: return {0.0f, 2.0f * inv_sqrt};
    case TensorRole::kNorm: return {1.0f, 0.1f};
    case TensorRole::kLinear: return {0.0f, inv_sqrt};
    case TensorRole::kOutProj: return {0.0f, 0.5f * inv_sqrt};
    case TensorRole::kCompressorGate: return {0.0f, 2.0f * inv_sqrt};
    // Up projections large enough to exercise the SwiGLU clamp (golden: a few values beyond ±10), down
    // projections small so the MoE output stays ~0.25 RMS against O(1) residual streams.
    case TensorRole::kFfnUp: return {0.0f, 2.5f * inv_sqrt};
    case TensorRole::kFfnDown: return {0.0f, 0.04f * inv_sqrt};
    case TensorRole::kHcFn: return {0.0f, 1.0f / std::sqrt(static_cast<float>(cols))};
    case TensorRole::kHcBase: return {0.0f, t.name.find("hc_head") != std::string::npos ? 0.5f : 1.0f};
    case TensorRole::kHcScale: return {1.0f, 0.2f};
    case TensorRole::kAttnSink: return {0.0f, 1.0f};
    case TensorRole::kApe: return {0.0f, 0.5f};
    case TensorRole::kGateBias: return {0.0f, 0.05f};
    case TensorRole::kTid2eid:
    case TensorRole::kScale: break;
  }
  return {0.0f, 0.0f};
}

// Runs fn(i) for i in [0, n) on up to n_threads threads (the caller's included).
template <typename Fn>
void parallel_for(size_t n, int n_threads, Fn&& fn) {
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(std::max(1, n_threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w; i < n; i += workers) fn(i);
    });
  for (size_t i = 0; i < n; i += workers) fn(i);
  for (auto& t : pool) t.join();
}

// Encodes one chunk of drawn rows into the tensor's on-disk bytes (and, for quantized weights, scales).
void encode_chunk(const ExpectedTensor& t, const std::vector<float>& v, uint64_t rows, uint64_t cols,
                  std::vector<uint8_t>& out, std::vector<uint8_t>& scales) {
  switch (t.format) {
    case TensorFormat::kFp8Block:
      out.resize(rows * cols);
      scales.resize(((rows + 127) / 128) * ((cols + 127) / 128));
      quantize_fp8_weight_blocks(v, rows, cols, out, scales);
      return;
    case TensorFormat::kFp4Packed:
      out.resize(rows * cols / 2);
      scales.resize(rows * cols / kFp4WeightBlock);
      quantize_fp4_weight_rows(v, rows, cols, out, scales);
      return;
    case TensorFormat::kPlain:
    case TensorFormat::kScale: break;
  }
  if (t.dtype == DType::kBF16) {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = float_to_bf16(v[i]);
      out[2 * i] = static_cast<uint8_t>(h & 0xFF);
      out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
  } else {  // F32, little-endian like every platform we build for
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  }
}

ordered_json num(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("make_tiny.write", p.string() + ": cannot open for writing");
  f << text;
  f.close();
  return f.good() ? Status::ok() : io_error("make_tiny.write", p.string() + ": write failed");
}

}  // namespace

Result<ModelConfig> make_tiny_preset(std::string_view name) {
  ModelConfig c = base_config();
  if (name == "tiny") {  // spec §6, with the real vocabulary
    c.dim = 256, c.moe_inter_dim = 256, c.n_layers = 6, c.n_hash_layers = 2;
    c.n_heads = 4, c.n_routed_experts = 8, c.n_activated_experts = 2;
    c.q_lora_rank = 128, c.head_dim = 128, c.o_groups = 2, c.o_lora_rank = 128;
    c.window_size = 16, c.compress_ratios = {0, 4, 128, 4, 8, 0, 0};
    c.index_n_heads = 4, c.index_topk = 8, c.max_position_embeddings = 1024;
  } else if (name == "small") {  // hidden 1024, 8 layers, every attention kind, 16 experts top-4
    c.dim = 1024, c.moe_inter_dim = 512, c.n_layers = 8, c.n_hash_layers = 2;
    c.n_heads = 8, c.n_routed_experts = 16, c.n_activated_experts = 4;
    c.q_lora_rank = 256, c.head_dim = 256, c.o_groups = 4, c.o_lora_rank = 256;
    c.window_size = 64, c.compress_ratios = {0, 4, 128, 4, 8, 4, 128, 0, 0};
    c.index_n_heads = 8, c.index_topk = 64, c.max_position_embeddings = 65536;
  } else if (name == "medium") {  // real V4-Flash layer dims, 8 layers, 64 experts top-6
    c.dim = 4096, c.moe_inter_dim = 2048, c.n_layers = 8, c.n_hash_layers = 2;
    c.n_heads = 64, c.n_routed_experts = 64, c.n_activated_experts = 6;
    c.q_lora_rank = 1024, c.head_dim = 512, c.o_groups = 8, c.o_lora_rank = 1024;
    c.window_size = 128, c.compress_ratios = {0, 0, 4, 128, 4, 128, 4, 128, 0};
    c.index_n_heads = 64, c.index_topk = 512, c.max_position_embeddings = 1048576;
  } else {
    return invalid_argument("make_tiny.preset", "unknown preset '" + std::string(name) + "' (tiny, small, medium)");
  }
  DSV4_RETURN_IF_ERROR(validate_model_config(c, "preset " + std::string(name)));
  return c;
}

std::string hf_config_json(const ModelConfig& c) {
  ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["expert_dtype"] = c.expert_dtype;
  j["hc_eps"] = c.hc_eps;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.dim;
  j["index_head_dim"] = c.index_head_dim;
  j["index_n_heads"] = c.index_n_heads;
  j["index_topk"] = c.index_topk;
  j["initializer_range"] = 0.02;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["model_type"] = c.model_type;
  j["moe_intermediate_size"] = c.moe_inter_dim;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["norm_topk_prob"] = true;
  j["num_attention_heads"] = c.n_heads;
  j["num_experts_per_tok"] = c.n_activated_experts;
  j["num_hidden_layers"] = c.n_layers;
  j["num_hash_layers"] = c.n_hash_layers;
  j["num_key_value_heads"] = 1;
  // spec §1: for 0731 the HF field stays 1 (vestigial); the stage count lives in inference/config.json.
  j["num_nextn_predict_layers"] = c.has_dspark() ? 1 : c.n_mtp_layers;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["q_lora_rank"] = c.q_lora_rank;
  j["qk_rope_head_dim"] = c.rope_head_dim;
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                              {"scale_fmt", "ue8m0"}, {"weight_block_size", {128, 128}}};
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_scaling"] = {{"beta_fast", num(c.beta_fast)}, {"beta_slow", num(c.beta_slow)}, {"factor", num(c.rope_factor)},
                       {"original_max_position_embeddings", c.original_seq_len}, {"type", "yarn"}};
  j["rope_theta"] = num(c.rope_theta);
  j["routed_scaling_factor"] = c.route_scale;
  j["scoring_func"] = c.score_func;
  j["sliding_window"] = c.window_size;
  j["swiglu_limit"] = c.swiglu_limit;
  j["tie_word_embeddings"] = false;
  j["topk_method"] = "noaux_tc";
  j["torch_dtype"] = "bfloat16";
  j["transformers_version"] = "4.57.1";
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  j["compress_rope_theta"] = num(c.compress_rope_theta);
  j["compress_ratios"] = c.compress_ratios;
  return j.dump(2) + "\n";
}

std::string inference_config_json(const ModelConfig& c) {
  ordered_json j;
  j["vocab_size"] = c.vocab_size;
  j["dim"] = c.dim;
  j["moe_inter_dim"] = c.moe_inter_dim;
  j["n_layers"] = c.n_layers;
  j["n_hash_layers"] = c.n_hash_layers;
  j["n_mtp_layers"] = c.n_mtp_layers;
  j["n_heads"] = c.n_heads;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["n_activated_experts"] = c.n_activated_experts;
  j["score_func"] = c.score_func;
  j["route_scale"] = c.route_scale;
  j["swiglu_limit"] = c.swiglu_limit;
  j["q_lora_rank"] = c.q_lora_rank;
  j["head_dim"] = c.head_dim;
  j["rope_head_dim"] = c.rope_head_dim;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["window_size"] = c.window_size;
  j["compress_ratios"] = c.compress_ratios;
  j["rope_theta"] = num(c.rope_theta);
  j["compress_rope_theta"] = num(c.compress_rope_theta);
  j["original_seq_len"] = c.original_seq_len;
  j["rope_factor"] = num(c.rope_factor);
  j["beta_fast"] = num(c.beta_fast);
  j["beta_slow"] = num(c.beta_slow);
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["norm_eps"] = c.norm_eps;
  j["dtype"] = "fp8";
  j["scale_fmt"] = "ue8m0";
  j["expert_dtype"] = c.expert_dtype;
  j["max_seq_len"] = c.max_position_embeddings;
  j["max_batch_size"] = 1;
  if (c.has_dspark()) {
    j["dspark_block_size"] = c.dspark_block_size;
    j["dspark_markov_rank"] = c.dspark_markov_rank;
    j["dspark_noise_token_id"] = c.dspark_noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  }
  return j.dump(2) + "\n";
}

DrawShape draw_shape(const ExpectedTensor& t) {
  if (t.shape.size() < 2) return {1, t.n_elements()};
  const uint64_t cols = t.format == TensorFormat::kFp4Packed ? t.shape[1] * 2 : t.shape[1];
  return {t.shape[0], cols};
}

std::vector<float> draw_rows(const ExpectedTensor& t, uint64_t seed, uint64_t row_begin, uint64_t row_end) {
  const DrawShape ds = draw_shape(t);
  const Init init = init_for(t, ds.cols);
  const uint64_t name_hash = fnv1a(t.name);
  std::vector<float> v((row_end - row_begin) * ds.cols);
  for (uint64_t r = row_begin; r < row_end; ++r) {
    RowRng rng(seed, name_hash, r);
    float* row = v.data() + (r - row_begin) * ds.cols;
    for (uint64_t c = 0; c < ds.cols; ++c) row[c] = init.mean + init.std * rng.normal();
  }
  return v;
}

std::vector<int64_t> draw_tid2eid_rows(const ExpectedTensor& t, int64_t n_routed, uint64_t seed, uint64_t row_begin,
                                       uint64_t row_end) {
  const uint64_t k = t.shape.size() == 2 ? t.shape[1] : 1;
  const uint64_t name_hash = fnv1a(t.name);
  std::vector<int64_t> out;
  out.reserve((row_end - row_begin) * k);
  std::vector<int64_t> perm(static_cast<size_t>(n_routed));
  for (uint64_t r = row_begin; r < row_end; ++r) {
    RowRng rng(seed, name_hash, r);
    for (int64_t e = 0; e < n_routed; ++e) perm[static_cast<size_t>(e)] = e;
    // Partial Fisher–Yates: k distinct experts (golden README 13: duplicates would be applied once).
    for (uint64_t i = 0; i < k; ++i) {
      const uint64_t j = i + rng.below(static_cast<uint64_t>(n_routed) - i);
      std::swap(perm[i], perm[j]);
      out.push_back(perm[i]);
    }
  }
  return out;
}

Result<MakeTinyReport> make_tiny_checkpoint(const ModelConfig& cfg, const fs::path& out, const MakeTinyOptions& opt) {
  DSV4_RETURN_IF_ERROR(validate_model_config(cfg, "make-tiny config"));
  std::error_code ec;
  if (fs::exists(out / "config.json", ec))
    return invalid_argument("make_tiny.exists", (out / "config.json").string() + " already exists; choose an empty directory");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ExpectedTensor> table = expected_tensors(cfg);
  std::vector<TensorHeader> headers;
  for (const auto& t : table) headers.push_back({t.name, t.dtype, t.shape});
  DSV4_ASSIGN_OR_RETURN(auto writer, ShardedCheckpointWriter::create(out, std::move(headers), opt.max_shard_bytes, opt.min_shards));

  std::vector<uint8_t> pending_scales;  // scales of the last quantized weight: the next table entry
  const size_t batch_chunks = static_cast<size_t>(std::max(1, opt.n_threads)) * 8;
  for (const ExpectedTensor& t : table) {
    if (t.format == TensorFormat::kScale) {
      if (pending_scales.size() != t.n_bytes())
        return internal_error("make_tiny.scale_size", t.name + ": scale bytes do not match its weight");
      DSV4_RETURN_IF_ERROR(writer->write(pending_scales));
      pending_scales.clear();
      continue;
    }
    const DrawShape ds = draw_shape(t);
    if (t.role == TensorRole::kTid2eid) {
      for (uint64_t r0 = 0; r0 < ds.rows; r0 += 4096) {
        const auto ids = draw_tid2eid_rows(t, cfg.n_routed_experts, opt.seed, r0, std::min(ds.rows, r0 + 4096));
        std::vector<uint8_t> bytes(ids.size() * 8);
        std::memcpy(bytes.data(), ids.data(), bytes.size());  // I64 little-endian
        DSV4_RETURN_IF_ERROR(writer->write(bytes));
      }
      continue;
    }
    // Chunks of 128 rows, a batch of them generated in parallel, then written in order.
    const uint64_t n_chunks = (ds.rows + kChunkRows - 1) / kChunkRows;
    for (uint64_t b0 = 0; b0 < n_chunks; b0 += batch_chunks) {
      const size_t nb = static_cast<size_t>(std::min<uint64_t>(batch_chunks, n_chunks - b0));
      std::vector<std::vector<uint8_t>> data(nb), scales(nb);
      parallel_for(nb, opt.n_threads, [&](size_t i) {
        const uint64_t r0 = (b0 + i) * kChunkRows, r1 = std::min(ds.rows, r0 + kChunkRows);
        const std::vector<float> v = draw_rows(t, opt.seed, r0, r1);
        encode_chunk(t, v, r1 - r0, ds.cols, data[i], scales[i]);
      });
      for (size_t i = 0; i < nb; ++i) {
        DSV4_RETURN_IF_ERROR(writer->write(data[i]));
        pending_scales.insert(pending_scales.end(), scales[i].begin(), scales[i].end());
      }
    }
  }
  DSV4_RETURN_IF_ERROR(writer->finish());

  MakeTinyReport rep;
  rep.n_tensors = table.size();
  rep.bytes = writer->total_bytes();
  rep.n_shards = writer->n_shards();
  // Configs last: a directory without config.json is recognisably unfinished.
  fs::create_directories(out / "inference", ec);
  if (ec) return io_error("make_tiny.write", (out / "inference").string() + ": " + ec.message());
  DSV4_RETURN_IF_ERROR(write_text(out / "inference" / "config.json", inference_config_json(cfg)));
  if (opt.tokenizer_dir.empty() || !fs::exists(opt.tokenizer_dir / "tokenizer.json", ec)) {
    rep.note = "no tokenizer copied: " + (opt.tokenizer_dir.empty() ? std::string("no tokenizer directory given")
                                                                     : (opt.tokenizer_dir / "tokenizer.json").string() + " not found");
  } else if (cfg.vocab_size < kOfficialVocab) {
    rep.note = "no tokenizer copied: vocab_size " + std::to_string(cfg.vocab_size) + " is smaller than the DeepSeek tokenizer's " +
               std::to_string(kOfficialVocab);
  } else {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      if (!fs::exists(opt.tokenizer_dir / f, ec)) continue;
      fs::copy_file(opt.tokenizer_dir / f, out / f, fs::copy_options::overwrite_existing, ec);
      if (ec) return io_error("make_tiny.tokenizer", (out / f).string() + ": " + ec.message());
    }
    rep.tokenizer_copied = true;
  }
  DSV4_RETURN_IF_ERROR(write_text(out / "config.json", hf_config_json(cfg)));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

}  // namespace dsv4
