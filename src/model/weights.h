// model: the DeepSeek-V4 weights in internal form. Every tensor is decoded exactly to fp32 once at load
// (FP8/FP4 × E8M0 scales, BF16, F32), as the reference path needs; checkpoint tensor names stay inside
// weights.cc, whose table maps them to these structs with dtype and shape checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/status.h"
#include "io/model_config.h"
#include "ops/reference/linear.h"

namespace dsv4 {

class Checkpoint;

// A linear layer, weights dequantized to fp32. params.act_quant is set for FP8/FP4 checkpoint weights.
struct LinearWeight {
  ref::LinearParams params;
  std::vector<float> w;  // [n_out, n_in]
};

struct HcWeights {
  std::vector<float> fn;     // [n_mix, hc·dim]
  std::vector<float> base;   // [n_mix]
  std::vector<float> scale;  // [3] (hc_head: [1])
};

struct CompressorWeights {
  int64_t ratio = 0;
  int64_t head_dim = 0;  // dc
  bool overlap = false;  // ratio == 4: two halves of 2·dc channels
  LinearWeight wkv, wgate;  // fp32 linears [coff·dc, dim]
  std::vector<float> ape;   // [ratio, coff·dc]
  std::vector<float> norm;  // [dc]
};

struct IndexerWeights {
  LinearWeight wq_b;          // [n_heads·head_dim, q_lora_rank] FP8
  LinearWeight weights_proj;  // [n_heads, dim] BF16
  CompressorWeights compressor;
};

struct AttentionWeights {
  std::vector<float> sink;  // [n_heads]
  LinearWeight wq_a, wq_b, wkv, wo_b;
  std::vector<float> q_norm, kv_norm;
  std::vector<float> wo_a;  // [o_groups·o_lora_rank, n_heads·head_dim/o_groups], rounded to bf16 (spec §3)
  bool has_compressor = false;
  CompressorWeights compressor;
  bool has_indexer = false;
  IndexerWeights indexer;
};

struct ExpertWeights {
  LinearWeight w1, w2, w3;
};

struct MoeWeights {
  LinearWeight gate;             // [n_experts, dim] fp32 GEMM
  std::vector<float> bias;       // [n_experts] (non-hash layers)
  std::vector<int32_t> tid2eid;  // [vocab, top_k] (hash layers)
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
};

struct BlockWeights {
  std::vector<float> attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights moe;
};

struct MtpWeights {
  BlockWeights block;
  LinearWeight e_proj, h_proj;
  std::vector<float> enorm, hnorm, norm;
  HcWeights hc_head;
};

struct ModelWeights {
  std::vector<float> embed;  // [vocab, dim]
  LinearWeight head;         // [vocab, dim] fp32 GEMM
  std::vector<float> norm;
  HcWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;
};

// Loads and decodes every tensor the config calls for; a missing tensor, a wrong dtype or shape, or a bad
// value (tid2eid outside the expert range) is an invalid_file error naming the tensor.
Result<std::unique_ptr<ModelWeights>> load_model_weights(const Checkpoint& ck, const ModelConfig& cfg);

}  // namespace dsv4
