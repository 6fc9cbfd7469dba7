// model: what a config costs — parameters (total / active per token), bytes by dtype, KV and state bytes
// (spec §4, bf16 reference layout and the 584-byte FP8 entry layout) and FLOPs per generated token at a
// given context; plus the same model for V3.2-Exp DSA (spec §5) to compare against. Pure arithmetic over
// the tensor table (tensor_layout.h) and the spec's formulas; nothing is measured here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace dsv4 {

// ---- parameters and bytes (from the tensor table) ----
struct ParamCost {
  uint64_t n_tensors = 0;
  uint64_t params_total = 0;        // backbone: embed + blocks + head (what "284B" counts); no scales
  uint64_t params_mtp = 0;          // MTP / DSpark stages (not part of params_total)
  uint64_t params_embedding = 0;    // embed.weight
  uint64_t params_routed_experts = 0;  // all routed experts of the backbone
  // One token's compute touches every backbone weight except the routed experts it is not sent to and
  // the embedding table (a one-row lookup): params_total - embedding - params_routed_experts *
  // (1 - n_activated / n_routed). Official config: 13.27B (the spec's ≈12.7–13B leaves out the
  // compressors, indexers, gates and mHC, ≈0.4B). params_active_with_embedding adds the table back.
  uint64_t params_active_per_token = 0;
  uint64_t params_active_with_embedding = 0;
  uint64_t bytes_total = 0;                         // all tensors, MTP and scales included
  std::map<std::string, uint64_t> bytes_by_dtype;   // "F8_E4M3" -> bytes
};
ParamCost param_cost(const ModelConfig& cfg);

// ---- KV cache and generation state (spec §4) ----
enum class KvLayout {
  kBf16Reference,  // the reference's bf16 buffers: 512-dim rows, bf16 indexer keys, f32 compressor state
  kFp8,            // 584 B per 512-dim row (448 E4M3 + 64 BF16 rope + 7 ue8m0 + 1 pad); indexer keys as
                   // packed FP4 + ue8m0 per 32 (exactly the reference's FP4 grid); f32 compressor state
};
std::string_view kv_layout_name(KvLayout layout);

struct KvCost {
  double bytes_per_token = 0;  // growth per context token (compressed entries and indexer keys), backbone
  uint64_t bytes_at_context = 0;  // everything one sequence holds at `context` tokens, MTP stages included
  uint64_t window_bytes = 0;      // part of bytes_at_context: window rings
  uint64_t compressed_bytes = 0;  // part: compressed entries
  uint64_t indexer_bytes = 0;     // part: indexer keys
  uint64_t state_bytes = 0;       // part: compressor partial-block state (f32)
};
// Bytes of one main KV row (head_dim wide) and of one indexer key in `layout`.
uint64_t kv_row_bytes(const ModelConfig& cfg, KvLayout layout);
uint64_t indexer_key_bytes(const ModelConfig& cfg, KvLayout layout);
KvCost kv_cost(const ModelConfig& cfg, int64_t context, KvLayout layout);

// ---- FLOPs per generated token (2 per multiply-add) ----
struct FlopCost {
  double projections = 0;  // attention q/kv/o projections (and MTP-free backbone only)
  double attention = 0;    // QK and PV over window + selected / all compressed entries
  double indexer = 0;      // indexer q projection, head weights, scoring over every compressed entry
  double compressors = 0;  // compressor (and indexer-compressor) wkv/wgate on the new token
  double moe = 0;          // gate, activated routed experts, shared experts (V3.2: also dense FFNs)
  double mhc = 0;          // hc_pre / hc_post / hc_head mixing
  double head = 0;         // LM head
  double total() const { return projections + attention + indexer + compressors + moe + mhc + head; }
};
// One decode step whose query sits at position context-1 (it sees `context` tokens), backbone only.
FlopCost flops_per_token(const ModelConfig& cfg, int64_t context);

// ---- V3.2-Exp DSA (spec §5), for --compare-v32 ----
struct V32Config {
  int64_t vocab_size = 129280, dim = 7168, n_layers = 61, n_dense_layers = 3, inter_dim = 18432;
  int64_t moe_inter_dim = 2048, n_routed_experts = 256, n_shared_experts = 1, n_activated_experts = 8;
  int64_t n_heads = 128, q_lora_rank = 1536, kv_lora_rank = 512, qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64, v_head_dim = 128;
  int64_t index_n_heads = 64, index_head_dim = 128, index_topk = 2048;
};
// Absorbed-MLA decode (the form DSA's sparse kernel runs): q_nope is mapped into the 512-dim latent,
// attention runs over min(topk, context) latent rows, then the value up-projection.
FlopCost v32_flops_per_token(const V32Config& cfg, int64_t context);
// V3.2 caches per token and layer: latent 512 + rope 64 (bf16: 1152 B; FP8 sparse layout: 656 B =
// 512 E4M3 + 4 f32 scales + 64 BF16) plus the indexer key (FP8 128 B + f32 scale in both).
KvCost v32_kv_cost(const V32Config& cfg, int64_t context, KvLayout layout);

}  // namespace dsv4
