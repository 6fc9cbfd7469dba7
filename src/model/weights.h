// model: the DeepSeek-V4 weights in internal form; checkpoint tensor names stay inside weights.cc, whose
// table maps them to these structs with dtype and shape checks. The checkpoint mapping lives as long as
// the weights. Linears are held per backend: the reference backend decodes them exactly to fp32 at load
// (FP8/FP4 × E8M0 scales, BF16, F32); the cpu backend keeps views of the packed FP8/FP4/BF16 data in
// the mapping (kernels/cpu reads them in place), so a checkpoint larger than RAM in fp32 still loads.
// Small fp32 tensors (norms, mHC, sinks, biases) are decoded on both; the embedding never is (rows are
// decoded when gathered).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/model_config.h"
#include "kernels/cpu/moe_expert.h"
#include "model/deepseek_v4/execution.h"
#include "ops/reference/linear.h"

namespace dsv4 {

class Checkpoint;

// How a linear's weight is held: decoded fp32 (the reference backend, or an F32 checkpoint tensor on
// the cpu backend), or a view of the checkpoint's packed codes for the cpu kernels.
enum class WeightFormat : uint8_t { kF32, kFp8, kFp4, kBf16 };

// A linear layer. params.act_quant is set for FP8/FP4 checkpoint weights (spec §3). Exactly one of the
// weight members is in use, per `format`.
struct LinearWeight {
  ref::LinearParams params;
  WeightFormat format = WeightFormat::kF32;
  std::vector<float> w;  // kF32: [n_out, n_in]
  kernels::Fp8Matrix fp8;
  kernels::Fp4Matrix fp4;
  kernels::Bf16Matrix bf16;
  std::vector<uint16_t> bf16_owned;  // backs `bf16` when the mapping's data is unaligned or converted
  std::vector<uint8_t> bf16_row_ok;  // backs bf16.row_ok: each row's VDPBF16PS guard, found once at load
};

// The token embedding, left in the mapping ([vocab, dim] BF16, F16 or F32); rows decode exactly.
struct EmbeddingTable {
  const std::byte* data = nullptr;
  DType dtype = DType::kBF16;
  int64_t vocab = 0, dim = 0;
  // out: [dim] fp32 values of row `token` (0 <= token < vocab).
  void row(int32_t token, float* out) const;
};

struct HcWeights {
  std::vector<float> fn;     // [n_mix, hc·dim]
  // cpu backend: fn as the mix kernel's 4-mix panels (kernels/cpu/hc_mix.h), [ld / 4, hc·dim, 4]; empty on
  // the reference backend.
  std::vector<float> fn_packed;
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
  // [o_groups·o_lora_rank, n_heads·head_dim/o_groups], bf16 values (spec §3: FP8 dequantized then
  // rounded to bf16 at conversion). The cpu backend keeps the FP8 view when that rounding is exact for
  // every element and each group is whole 128-row scale blocks, else a bf16 copy.
  LinearWeight wo_a;
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
  // cpu backend, FP4 routed experts + FP8 shared expert: the views kernels::moe_layer runs on.
  bool fused = false;
  std::vector<kernels::Fp4Expert> fp4_experts;
  kernels::Fp8Expert fp8_shared;
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
  std::shared_ptr<const Checkpoint> checkpoint;  // the mapping every view points into
  EmbeddingTable embed;  // [vocab, dim]
  LinearWeight head;         // [vocab, dim] fp32 GEMM
  std::vector<float> norm;
  HcWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;
};

// Loads every tensor the config calls for, in the form `backend` runs; a missing tensor, a wrong dtype or
// shape, or a bad value (tid2eid outside the expert range) is an invalid_file error naming the tensor.
Result<std::unique_ptr<ModelWeights>> load_model_weights(std::shared_ptr<const Checkpoint> ck, const ModelConfig& cfg,
                                                         Backend backend);

}  // namespace dsv4
