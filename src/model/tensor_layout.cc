// model: the spec §3 tensor table and the checkpoint-vs-table check.
#include "model/tensor_layout.h"

#include <map>
#include <set>

#include "io/safetensors.h"

namespace dsv4 {
namespace {

constexpr uint64_t kFp8Block = 128;  // spec §3: one ue8m0 scale per 128x128 weight block
constexpr uint64_t kFp4Block = 32;   // spec §3: one ue8m0 scale per 32 K-elements per row

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

// Emits table rows for one prefix ("", "layers.3.", "mtp.0.") of one block.
class Emitter {
 public:
  Emitter(const ModelConfig& cfg, const std::function<void(const ExpectedTensor&)>& fn) : cfg_(cfg), fn_(fn) {}

  void set_scope(std::string prefix, int64_t layer) {
    prefix_ = std::move(prefix);
    layer_ = layer;
  }

  void plain(const std::string& name, DType dt, std::vector<uint64_t> shape, TensorRole role, int64_t expert = -1) {
    ExpectedTensor t;
    t.name = prefix_ + name;
    t.dtype = dt;
    t.shape = std::move(shape);
    t.role = role;
    t.layer = layer_;
    t.expert = expert;
    if (dt == DType::kBF16 && t.shape.size() == 2 && role != TensorRole::kEmbedding) t.fan_in = t.shape[1];
    fn_(t);
  }

  // FP8 block-scaled linear [out, in] + its scale (spec §3 "FP8 weights").
  void fp8_linear(const std::string& name, uint64_t out, uint64_t in, TensorRole role, int64_t expert = -1) {
    ExpectedTensor w;
    w.name = prefix_ + name + ".weight";
    w.dtype = DType::kF8E4M3;
    w.shape = {out, in};
    w.format = TensorFormat::kFp8Block;
    w.role = role;
    w.layer = layer_;
    w.expert = expert;
    w.fan_in = in;
    fn_(w);
    ExpectedTensor s = w;
    s.name = prefix_ + name + ".scale";
    s.dtype = DType::kF8E8M0;
    s.shape = {ceil_div(out, kFp8Block), ceil_div(in, kFp8Block)};
    s.format = TensorFormat::kScale;
    s.role = TensorRole::kScale;
    s.fan_in = 0;
    fn_(s);
  }

  // Routed-expert linear: packed FP4 (I8 [out, in/2] + E8M0 [out, in/32]), or FP8 when expert_dtype=fp8.
  void expert_linear(const std::string& name, uint64_t out, uint64_t in, TensorRole role, int64_t expert) {
    if (cfg_.expert_dtype == "fp8") return fp8_linear(name, out, in, role, expert);
    ExpectedTensor w;
    w.name = prefix_ + name + ".weight";
    w.dtype = DType::kI8;
    w.shape = {out, in / 2};
    w.format = TensorFormat::kFp4Packed;
    w.role = role;
    w.layer = layer_;
    w.expert = expert;
    w.fan_in = in;
    fn_(w);
    ExpectedTensor s = w;
    s.name = prefix_ + name + ".scale";
    s.dtype = DType::kF8E8M0;
    s.shape = {out, in / kFp4Block};
    s.format = TensorFormat::kScale;
    s.role = TensorRole::kScale;
    s.fan_in = 0;
    fn_(s);
  }

  // hc_{site}_fn / _base / _scale (spec §2.2): mix = (2 + hc) * hc outputs for a block site, hc for the head.
  void hc_site(const std::string& site, uint64_t mix, uint64_t n_scales) {
    const uint64_t hc_d = u(cfg_.hc_mult) * u(cfg_.dim);
    plain("hc_" + site + "_fn", DType::kF32, {mix, hc_d}, TensorRole::kHcFn);
    plain("hc_" + site + "_base", DType::kF32, {mix}, TensorRole::kHcBase);
    plain("hc_" + site + "_scale", DType::kF32, {n_scales}, TensorRole::kHcScale);
  }

  void hc_head() { hc_site("head", u(cfg_.hc_mult), 1); }

  // Compressor of ratio r with output width dc (spec §2.5): c = 2 (overlap) iff r == 4.
  void compressor(const std::string& name, int64_t ratio, uint64_t dc) {
    const uint64_t c = ratio == 4 ? 2 : 1;
    const uint64_t d = u(cfg_.dim);
    plain(name + ".ape", DType::kF32, {u(ratio), c * dc}, TensorRole::kApe);
    plain(name + ".wkv.weight", DType::kBF16, {c * dc, d}, TensorRole::kLinear);
    plain(name + ".wgate.weight", DType::kBF16, {c * dc, d}, TensorRole::kCompressorGate);
    plain(name + ".norm.weight", DType::kBF16, {dc}, TensorRole::kNorm);
  }

  // Every key of one Block (spec §3 rows "layers.L.*"); `hash` selects tid2eid over gate.bias.
  void block(int64_t ratio, bool hash) {
    const uint64_t d = u(cfg_.dim), hc = u(cfg_.hc_mult);
    const uint64_t n_heads = u(cfg_.n_heads), head_dim = u(cfg_.head_dim);
    hc_site("attn", (2 + hc) * hc, 3);
    hc_site("ffn", (2 + hc) * hc, 3);
    plain("attn_norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
    plain("ffn_norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
    plain("attn.attn_sink", DType::kF32, {n_heads}, TensorRole::kAttnSink);
    fp8_linear("attn.wq_a", u(cfg_.q_lora_rank), d, TensorRole::kLinear);
    plain("attn.q_norm.weight", DType::kBF16, {u(cfg_.q_lora_rank)}, TensorRole::kNorm);
    fp8_linear("attn.wq_b", n_heads * head_dim, u(cfg_.q_lora_rank), TensorRole::kLinear);
    fp8_linear("attn.wkv", head_dim, d, TensorRole::kLinear);
    plain("attn.kv_norm.weight", DType::kBF16, {head_dim}, TensorRole::kNorm);
    // wo_a: o_groups stacked [o_lora, n_heads*head_dim/o_groups] matrices (spec §2.3 step 6).
    const uint64_t o_groups = u(cfg_.o_groups), o_rank = u(cfg_.o_lora_rank);
    fp8_linear("attn.wo_a", o_groups * o_rank, n_heads * head_dim / o_groups, TensorRole::kLinear);
    fp8_linear("attn.wo_b", d, o_groups * o_rank, TensorRole::kOutProj);
    if (ratio > 0) compressor("attn.compressor", ratio, head_dim);
    if (ratio == 4) {
      const uint64_t ih = u(cfg_.index_n_heads), idim = u(cfg_.index_head_dim);
      fp8_linear("attn.indexer.wq_b", ih * idim, u(cfg_.q_lora_rank), TensorRole::kLinear);
      plain("attn.indexer.weights_proj.weight", DType::kBF16, {ih, d}, TensorRole::kLinear);
      compressor("attn.indexer.compressor", ratio, idim);
    }
    const uint64_t n_experts = u(cfg_.n_routed_experts), inter = u(cfg_.moe_inter_dim);
    plain("ffn.gate.weight", DType::kBF16, {n_experts, d}, TensorRole::kLinear);
    if (hash)
      plain("ffn.gate.tid2eid", DType::kI64, {u(cfg_.vocab_size), u(cfg_.n_activated_experts)}, TensorRole::kTid2eid);
    else
      plain("ffn.gate.bias", DType::kF32, {n_experts}, TensorRole::kGateBias);
    for (uint64_t e = 0; e < n_experts; ++e) {
      const std::string p = "ffn.experts." + std::to_string(e);
      const auto eid = static_cast<int64_t>(e);
      expert_linear(p + ".w1", inter, d, TensorRole::kFfnUp, eid);
      expert_linear(p + ".w3", inter, d, TensorRole::kFfnUp, eid);
      expert_linear(p + ".w2", d, inter, TensorRole::kFfnDown, eid);
    }
    if (cfg_.n_shared_experts > 0) {
      const uint64_t shared = u(cfg_.n_shared_experts) * inter;
      fp8_linear("ffn.shared_experts.w1", shared, d, TensorRole::kFfnUp);
      fp8_linear("ffn.shared_experts.w3", shared, d, TensorRole::kFfnUp);
      fp8_linear("ffn.shared_experts.w2", d, shared, TensorRole::kFfnDown);
    }
  }

 private:
  const ModelConfig& cfg_;
  const std::function<void(const ExpectedTensor&)>& fn_;
  std::string prefix_;
  int64_t layer_ = -1;
};

std::string describe(DType dt, const std::vector<uint64_t>& shape) {
  return std::string(dtype_name(dt)) + " " + shape_string(shape);
}

}  // namespace

uint64_t ExpectedTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t ExpectedTensor::n_bytes() const { return n_elements() * dtype_size(dtype); }

uint64_t ExpectedTensor::n_params() const {
  if (format == TensorFormat::kScale) return 0;
  if (format == TensorFormat::kFp4Packed) return 2 * n_elements();
  return n_elements();
}

void for_each_expected_tensor(const ModelConfig& cfg, const std::function<void(const ExpectedTensor&)>& fn) {
  Emitter em(cfg, fn);
  const uint64_t d = u(cfg.dim), vocab = u(cfg.vocab_size);
  em.set_scope("", -1);
  em.plain("embed.weight", DType::kBF16, {vocab, d}, TensorRole::kEmbedding);
  em.plain("head.weight", DType::kBF16, {vocab, d}, TensorRole::kHead);
  em.plain("norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
  em.hc_head();
  for (int64_t il = 0; il < cfg.n_layers; ++il) {
    em.set_scope("layers." + std::to_string(il) + ".", il);
    em.block(cfg.compress_ratio(il), cfg.is_hash_layer(il));
  }
  for (int64_t j = 0; j < cfg.n_mtp_layers; ++j) {
    const int64_t il = cfg.n_layers + j;
    em.set_scope("mtp." + std::to_string(j) + ".", il);
    // MTP / DSpark stages never hash-route: they carry their own gate.bias (spec §3, §2.11).
    em.block(cfg.compress_ratio(il), /*hash=*/false);
    if (!cfg.has_dspark()) {
      // April MTP (spec §2.11): embedding/hidden projections, their norms, own final norm and hc_head.
      em.fp8_linear("e_proj", d, d, TensorRole::kLinear);
      em.fp8_linear("h_proj", d, d, TensorRole::kLinear);
      em.plain("enorm.weight", DType::kBF16, {d}, TensorRole::kNorm);
      em.plain("hnorm.weight", DType::kBF16, {d}, TensorRole::kNorm);
      em.plain("norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
      em.hc_head();
      continue;
    }
    // 0731 DSpark (spec §2.12): stage 0 projects the target layers' features; the last stage owns the head.
    if (j == 0) {
      const uint64_t n_targets = cfg.dspark_target_layer_ids.empty() ? 3 : cfg.dspark_target_layer_ids.size();
      em.fp8_linear("main_proj", d, n_targets * d, TensorRole::kLinear);
      em.plain("main_norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
    }
    if (j == cfg.n_mtp_layers - 1) {
      const uint64_t rank = u(cfg.dspark_markov_rank);
      em.plain("norm.weight", DType::kBF16, {d}, TensorRole::kNorm);
      em.hc_head();
      em.plain("markov_head.markov_w1.weight", DType::kBF16, {vocab, rank}, TensorRole::kEmbedding);
      em.plain("markov_head.markov_w2.weight", DType::kBF16, {vocab, rank}, TensorRole::kHead);
      em.plain("confidence_head.proj.weight", DType::kBF16, {1, d + rank}, TensorRole::kLinear);
    }
  }
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& cfg) {
  std::vector<ExpectedTensor> out;
  for_each_expected_tensor(cfg, [&](const ExpectedTensor& t) { out.push_back(t); });
  return out;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status CheckpointCheck::to_status(std::string_view source) const {
  if (ok()) return Status::ok();
  std::string msg = std::string(source) + ": checkpoint does not match the config's tensor layout (" +
                    std::to_string(missing.size()) + " missing, " + std::to_string(extra.size()) + " unexpected, " +
                    std::to_string(misshaped.size()) + " mis-shaped, " + std::to_string(wrong_dtype.size()) +
                    " wrong dtype)";
  int shown = 0;
  auto add = [&](const std::string& what) {
    if (shown++ < 5) msg += "; " + what;
  };
  for (const auto& n : missing) add("missing " + n);
  for (const auto& n : extra) add("unexpected " + n);
  for (const auto& m : misshaped) add(m.name + " is " + m.actual + ", expected " + m.expected);
  for (const auto& m : wrong_dtype) add(m.name + " is " + m.actual + ", expected " + m.expected);
  return invalid_file("checkpoint.layout", msg);
}

CheckpointCheck check_checkpoint(const ModelConfig& cfg, const Checkpoint& ckpt) {
  CheckpointCheck r;
  r.n_present = ckpt.tensors().size();
  std::set<std::string> expected_names;
  for_each_expected_tensor(cfg, [&](const ExpectedTensor& t) {
    ++r.n_expected;
    expected_names.insert(t.name);
    const TensorInfo* got = ckpt.find(t.name);
    if (got == nullptr) {
      r.missing.push_back(t.name);
      return;
    }
    if (got->dtype != t.dtype)
      r.wrong_dtype.push_back({t.name, describe(t.dtype, t.shape), describe(got->dtype, got->shape)});
    if (got->shape != t.shape)
      r.misshaped.push_back({t.name, describe(t.dtype, t.shape), describe(got->dtype, got->shape)});
  });
  for (const auto& t : ckpt.tensors())
    if (!expected_names.count(t.name)) r.extra.push_back(t.name);
  return r;
}

}  // namespace dsv4
