// model: the checkpoint's tensor table (spec §3), derived from a ModelConfig. One table is shared by the
// loader, `dsv4 inspect` (check_checkpoint), the cost model (parameter/byte counts) and `dsv4 make-tiny`
// (what to generate): ForEachTensor style, so the layout is written exactly once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"

namespace dsv4 {

class Checkpoint;

// How a tensor's bytes encode its values.
enum class TensorFormat {
  kPlain,      // BF16 / F32 / I64 values as stored
  kFp8Block,   // F8_E4M3 weight; its F8_E8M0 scale [ceil(o/128), ceil(i/128)] follows in the table
  kFp4Packed,  // I8 [o, i/2], two E2M1 per byte (low nibble first); its E8M0 scale [o, i/32] follows
  kScale,      // the F8_E8M0 scale of the preceding kFp8Block / kFp4Packed weight
};

// What the tensor is for: the cost model groups by it, make-tiny draws values by it.
enum class TensorRole {
  kEmbedding,      // embed.weight, DSpark markov_w1: [vocab, d] lookup tables
  kHead,           // head.weight, DSpark markov_w2: [vocab, d] output projections
  kNorm,           // RMSNorm weights
  kLinear,         // generic input-side projection (wq_a, wq_b, wkv, wo_a, e/h_proj, indexer, gate, ...)
  kOutProj,        // wo_b: the attention output written into the residual
  kCompressorGate, // compressor wgate (softmax scores over a block)
  kFfnUp,          // expert / shared-expert w1 and w3
  kFfnDown,        // expert / shared-expert w2
  kHcFn,           // hc_*_fn  [mix, hc*d]
  kHcBase,         // hc_*_base
  kHcScale,        // hc_*_scale
  kAttnSink,       // attn.attn_sink [n_heads]
  kApe,            // compressor.ape [ratio, c*dc]
  kGateBias,       // ffn.gate.bias [n_experts]
  kTid2eid,        // ffn.gate.tid2eid I64 [vocab, n_activated]
  kScale,          // block scales of quantized weights
};

struct ExpectedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // outermost first, as on disk
  TensorFormat format = TensorFormat::kPlain;
  TensorRole role = TensorRole::kLinear;
  int64_t layer = -1;   // block index: 0..n_layers-1 backbone, n_layers+j MTP/DSpark stage j; -1 top level
  int64_t expert = -1;  // routed expert id, -1 for everything else
  uint64_t fan_in = 0;  // logical input width of a linear (unpacked), 0 for non-linears

  bool is_mtp(const ModelConfig& cfg) const { return layer >= cfg.n_layers; }
  uint64_t n_elements() const;  // stored elements (bytes / dtype size)
  uint64_t n_bytes() const;
  // Logical parameters: FP4 packs two per stored byte; scales count zero.
  uint64_t n_params() const;
};

// Visits every tensor the checkpoint for `cfg` must hold, in the official file order: top level, then
// layers 0..n_layers-1, then the MTP (April) or DSpark (0731) stages. A quantized weight is always
// immediately followed by its scale.
void for_each_expected_tensor(const ModelConfig& cfg, const std::function<void(const ExpectedTensor&)>& fn);
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& cfg);

// "[128, 256]"
std::string shape_string(const std::vector<uint64_t>& shape);

struct TensorMismatch {
  std::string name;
  std::string expected;  // "F8_E4M3 [128, 256]"
  std::string actual;
};

// The checkpoint against the table: names missing from it, names it does not expect, tensors with the
// wrong shape (a scale whose shape does not match its weight's block grid lands here) or dtype.
struct CheckpointCheck {
  size_t n_expected = 0;
  size_t n_present = 0;
  std::vector<std::string> missing;
  std::vector<std::string> extra;
  std::vector<TensorMismatch> misshaped;
  std::vector<TensorMismatch> wrong_dtype;

  bool ok() const { return missing.empty() && extra.empty() && misshaped.empty() && wrong_dtype.empty(); }
  // ok, or kInvalidFile with rule "checkpoint.layout" and the first few problems named.
  Status to_status(std::string_view source) const;
};

CheckpointCheck check_checkpoint(const ModelConfig& cfg, const Checkpoint& ckpt);

}  // namespace dsv4
