// model: the checkpoint → internal weights table (spec §3 tensor list). Checkpoint names exist only here.
#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/formats.h"
#include "io/safetensors.h"
#include "kernels/cpu/hc_mix.h"

namespace dsv4 {
namespace {

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// How a linear's checkpoint weight is run (spec §2.0).
enum class LinearKind {
  kQuantized,  // FP8 (+E8M0 128×128 scale) → FP8 activation quant, bf16 output; BF16 weight → bf16 matmul
  kExpert,     // FP4 packed I8 (+E8M0 1×32 scale) or FP8; FP8 activation quant, bf16 output
  kBf16,       // BF16 weight, bf16 output (weights_proj)
  kF32Gemm,    // BF16/F32 weight run as an fp32 GEMM with fp32 output (compressor, gate, head)
};

class Loader {
 public:
  Loader(const Checkpoint& ck, Backend backend) : ck_(ck), backend_(backend) {}
  Backend backend() const { return backend_; }

  Result<const TensorInfo*> get(const std::string& name, const std::vector<uint64_t>& shape) {
    const TensorInfo* t = ck_.find(name);
    if (!t) return not_found("model.missing_tensor", "checkpoint has no tensor '" + name + "'");
    if (t->shape != shape)
      return invalid_file("model.tensor_shape", "tensor '" + name + "' has shape " + shape_str(t->shape) +
                                                    ", the config implies " + shape_str(shape));
    return t;
  }

  // BF16 / F32 / F16 tensor → fp32 values.
  Status floats(const std::string& name, const std::vector<uint64_t>& shape, std::vector<float>* out) {
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* t, get(name, shape));
    return decode_float(*t, out);
  }

  Status linear(const std::string& prefix, int64_t n_out, int64_t n_in, LinearKind kind, LinearWeight* lw) {
    const std::string wname = prefix + ".weight";
    const TensorInfo* t = ck_.find(wname);
    if (!t) return not_found("model.missing_tensor", "checkpoint has no tensor '" + wname + "'");
    lw->params.n_in = n_in;
    lw->params.n_out = n_out;
    lw->params.out_round = kind == LinearKind::kF32Gemm ? ref::OutRound::kF32 : ref::OutRound::kBf16;
    lw->params.act_quant = ref::ActQuant::kNone;
    lw->format = WeightFormat::kF32;
    const auto no = static_cast<uint64_t>(n_out), ni = static_cast<uint64_t>(n_in);
    const bool views = backend_ == Backend::kCpu;
    if (t->dtype == DType::kF8E4M3 && (kind == LinearKind::kQuantized || kind == LinearKind::kExpert)) {
      DSV4_RETURN_IF_ERROR(get(wname, {no, ni}).status());
      lw->params.act_quant = ref::ActQuant::kFp8Block128;
      DSV4_RETURN_IF_ERROR(need_k128(wname, n_in));
      if (!views) return dequant_fp8(prefix, no, ni, &lw->w);
      DSV4_ASSIGN_OR_RETURN(const TensorInfo* s, fp8_scale(prefix, no, ni));
      lw->format = WeightFormat::kFp8;
      lw->fp8 = {bytes(*t), bytes(*s), n_out, n_in};
      return Status::ok();
    }
    if (t->dtype == DType::kI8 && kind == LinearKind::kExpert) {
      if (n_in % 32 != 0) return invalid_file("model.fp4_shape", wname + ": FP4 needs in % 32 == 0");
      DSV4_RETURN_IF_ERROR(get(wname, {no, ni / 2}).status());
      DSV4_ASSIGN_OR_RETURN(const TensorInfo* s, get(prefix + ".scale", {no, ni / 32}));
      if (s->dtype != DType::kF8E8M0) return bad_dtype(*s, "F8_E8M0");
      lw->params.act_quant = ref::ActQuant::kFp8Block128;
      DSV4_RETURN_IF_ERROR(need_k128(wname, n_in));
      if (views) {
        lw->format = WeightFormat::kFp4;
        lw->fp4 = {bytes(*t), bytes(*s), n_out, n_in};
        return Status::ok();
      }
      lw->w.resize(no * ni);
      ref::dequantize_fp4_block32(bytes(*t), bytes(*s), n_out, n_in, lw->w.data());
      return Status::ok();
    }
    if (t->dtype == DType::kBF16 || t->dtype == DType::kF32) {
      if (kind == LinearKind::kExpert) return bad_dtype(*t, "I8 (packed FP4) or F8_E4M3");
      DSV4_RETURN_IF_ERROR(get(wname, {no, ni}).status());
      if (views && t->dtype == DType::kBF16) {
        bf16_view(*t, n_out, n_in, lw);
        return Status::ok();
      }
      // F32 weights have no packed kernel: both backends run them as decoded fp32.
      return floats(wname, {no, ni}, &lw->w);
    }
    return bad_dtype(*t, kind == LinearKind::kExpert ? "I8 (packed FP4) or F8_E4M3" : "F8_E4M3, BF16 or F32");
  }

  // wo_a: FP8 on disk, dequantized and rounded to bf16 as convert.py does (spec §3); or already BF16.
  // Run without activation quantization, bf16 output (the reference's bf16 einsum, spec §2.8).
  Status wo_a(const std::string& prefix, int64_t n_out, int64_t n_in, int64_t group_rows, LinearWeight* lw) {
    const std::string wname = prefix + ".weight";
    const auto no = static_cast<uint64_t>(n_out), ni = static_cast<uint64_t>(n_in);
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* t, get(wname, {no, ni}));
    lw->params = {n_in, n_out, ref::ActQuant::kNone, ref::OutRound::kBf16};
    lw->format = WeightFormat::kF32;
    const bool views = backend_ == Backend::kCpu;
    if (t->dtype == DType::kF8E4M3) {
      if (views) {
        DSV4_ASSIGN_OR_RETURN(const TensorInfo* s, fp8_scale(prefix, no, ni));
        // A normal fp32 value e4m3·2^(e−127) has ≤ 4 significant bits, so bf16 holds it exactly; every
        // E4M3 value times a scale with e in [10, 254] is normal. Then the FP8 view is the bf16 weight.
        const uint8_t* sc = bytes(*s);
        const bool exact = std::all_of(sc, sc + s->n_elements, [](uint8_t e) { return e >= 10 && e <= 254; });
        if (exact && group_rows % 128 == 0) {
          lw->format = WeightFormat::kFp8;
          lw->fp8 = {bytes(*t), sc, n_out, n_in};
          return Status::ok();
        }
        std::vector<float> f;
        DSV4_RETURN_IF_ERROR(dequant_fp8(prefix, no, ni, &f));
        lw->bf16_owned.resize(f.size());
        for (size_t i = 0; i < f.size(); ++i) lw->bf16_owned[i] = float_to_bf16(f[i]);
        lw->format = WeightFormat::kBf16;
        lw->bf16 = {lw->bf16_owned.data(), n_out, n_in};
        find_bf16_row_guards(lw);
        return Status::ok();
      }
      DSV4_RETURN_IF_ERROR(dequant_fp8(prefix, no, ni, &lw->w));
      for (float& v : lw->w) v = round_bf16(v);
      return Status::ok();
    }
    if (views && t->dtype == DType::kBF16) {
      bf16_view(*t, n_out, n_in, lw);
      return Status::ok();
    }
    return decode_float(*t, &lw->w);
  }

  Status embedding(const std::string& name, int64_t vocab, int64_t dim, EmbeddingTable* out) {
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* t, get(name, {u64(vocab), u64(dim)}));
    if (t->dtype != DType::kBF16 && t->dtype != DType::kF16 && t->dtype != DType::kF32)
      return bad_dtype(*t, "BF16, F16 or F32");
    *out = {t->data.data(), t->dtype, vocab, dim};
    return Status::ok();
  }

  Status tid2eid(const std::string& name, int64_t vocab, int64_t top_k, int64_t n_experts, std::vector<int32_t>* out) {
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* t, get(name, {static_cast<uint64_t>(vocab), static_cast<uint64_t>(top_k)}));
    if (t->dtype != DType::kI64 && t->dtype != DType::kI32) return bad_dtype(*t, "I64 or I32");
    out->resize(t->n_elements);
    for (uint64_t i = 0; i < t->n_elements; ++i) {
      int64_t v = 0;
      if (t->dtype == DType::kI64) {
        std::memcpy(&v, t->data.data() + i * 8, 8);
      } else {
        int32_t v32 = 0;
        std::memcpy(&v32, t->data.data() + i * 4, 4);
        v = v32;
      }
      if (v < 0 || v >= n_experts)
        return invalid_file("model.tid2eid_range", name + ": expert id " + std::to_string(v) + " outside [0, " +
                                                       std::to_string(n_experts) + ")");
      (*out)[i] = static_cast<int32_t>(v);
    }
    return Status::ok();
  }

 private:
  static Status bad_dtype(const TensorInfo& t, const std::string& want) {
    return invalid_file("model.tensor_dtype",
                        "tensor '" + t.name + "' has dtype " + std::string(dtype_name(t.dtype)) + ", expected " + want);
  }
  static Status need_k128(const std::string& name, int64_t n_in) {
    if (n_in % 128 != 0)
      return invalid_file("model.fp8_k_block", name + ": FP8 activation blocks need in_features % 128 == 0");
    return Status::ok();
  }

  Result<const TensorInfo*> fp8_scale(const std::string& prefix, uint64_t no, uint64_t ni) {
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* s, get(prefix + ".scale", {(no + 127) / 128, (ni + 127) / 128}));
    if (s->dtype != DType::kF8E8M0) return bad_dtype(*s, "F8_E8M0");
    return s;
  }

  Status dequant_fp8(const std::string& prefix, uint64_t no, uint64_t ni, std::vector<float>* out) {
    const TensorInfo* t = ck_.find(prefix + ".weight");
    DSV4_ASSIGN_OR_RETURN(const TensorInfo* s, fp8_scale(prefix, no, ni));
    out->resize(no * ni);
    ref::dequantize_fp8_block128(bytes(*t), bytes(*s), static_cast<int64_t>(no), static_cast<int64_t>(ni), out->data());
    return Status::ok();
  }

  static const uint8_t* bytes(const TensorInfo& t) { return reinterpret_cast<const uint8_t*>(t.data.data()); }
  static uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

  // A BF16 tensor as a kernel view; safetensors only aligns data to 8 bytes from the header's end in
  // practice, not by contract, so an odd address gets an owned copy instead of a misaligned uint16_t*.
  static void bf16_view(const TensorInfo& t, int64_t n_out, int64_t n_in, LinearWeight* lw) {
    lw->format = WeightFormat::kBf16;
    const std::byte* p = t.data.data();
    if (reinterpret_cast<uintptr_t>(p) % alignof(uint16_t) == 0) {
      lw->bf16 = {reinterpret_cast<const uint16_t*>(p), n_out, n_in};
    } else {
      lw->bf16_owned.resize(static_cast<size_t>(t.n_elements));
      std::memcpy(lw->bf16_owned.data(), p, t.n_elements * 2);
      lw->bf16 = {lw->bf16_owned.data(), n_out, n_in};
    }
    find_bf16_row_guards(lw);
  }

  // The weights never change, so the VDPBF16PS tile's per-row guard is found once here (one read of the
  // BF16 weights at load) rather than on every call.
  static void find_bf16_row_guards(LinearWeight* lw) {
    lw->bf16_row_ok.resize(static_cast<size_t>(lw->bf16.n_rows));
    kernels::bf16_rows_in_guard(lw->bf16.data, lw->bf16.n_rows, lw->bf16.n_cols, lw->bf16_row_ok.data());
    lw->bf16.row_ok = lw->bf16_row_ok.data();
  }

  static Status decode_float(const TensorInfo& t, std::vector<float>* out) {
    out->resize(t.n_elements);
    const std::byte* p = t.data.data();
    for (uint64_t i = 0; i < t.n_elements; ++i) {
      if (t.dtype == DType::kBF16) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        (*out)[i] = bf16_to_float(h);
      } else if (t.dtype == DType::kF16) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        (*out)[i] = f16_to_float(h);
      } else if (t.dtype == DType::kF32) {
        std::memcpy(&(*out)[i], p + i * 4, 4);
      } else {
        return bad_dtype(t, "BF16, F16 or F32");
      }
    }
    return Status::ok();
  }

  const Checkpoint& ck_;
  Backend backend_;
};

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

Status load_hc(Loader& ld, const std::string& p, const std::string& site, int64_t n_mix, int64_t n_scale,
               const ModelConfig& c, HcWeights* hw) {
  DSV4_RETURN_IF_ERROR(ld.floats(p + "hc_" + site + "_fn", {u(n_mix), u(c.hc_mult * c.dim)}, &hw->fn));
  if (ld.backend() == Backend::kCpu) hw->fn_packed = kernels::hc_pack_fn(hw->fn.data(), n_mix, c.hc_mult * c.dim);
  DSV4_RETURN_IF_ERROR(ld.floats(p + "hc_" + site + "_base", {u(n_mix)}, &hw->base));
  return ld.floats(p + "hc_" + site + "_scale", {u(n_scale)}, &hw->scale);
}

Status load_compressor(Loader& ld, const std::string& p, int64_t ratio, int64_t dc, const ModelConfig& c,
                       CompressorWeights* cw) {
  cw->ratio = ratio;
  cw->head_dim = dc;
  cw->overlap = ratio == 4;
  const int64_t coff = cw->overlap ? 2 : 1;
  DSV4_RETURN_IF_ERROR(ld.linear(p + "wkv", coff * dc, c.dim, LinearKind::kF32Gemm, &cw->wkv));
  DSV4_RETURN_IF_ERROR(ld.linear(p + "wgate", coff * dc, c.dim, LinearKind::kF32Gemm, &cw->wgate));
  DSV4_RETURN_IF_ERROR(ld.floats(p + "ape", {u(ratio), u(coff * dc)}, &cw->ape));
  return ld.floats(p + "norm.weight", {u(dc)}, &cw->norm);
}

Status load_expert(Loader& ld, const std::string& p, LinearKind kind, const ModelConfig& c, ExpertWeights* ew) {
  DSV4_RETURN_IF_ERROR(ld.linear(p + "w1", c.moe_inter_dim, c.dim, kind, &ew->w1));
  DSV4_RETURN_IF_ERROR(ld.linear(p + "w2", c.dim, c.moe_inter_dim, kind, &ew->w2));
  return ld.linear(p + "w3", c.moe_inter_dim, c.dim, kind, &ew->w3);
}

Status load_block(Loader& ld, const std::string& p, int64_t il, const ModelConfig& c, BlockWeights* bw) {
  const int64_t n_mix = (2 + c.hc_mult) * c.hc_mult;
  DSV4_RETURN_IF_ERROR(ld.floats(p + "attn_norm.weight", {u(c.dim)}, &bw->attn_norm));
  DSV4_RETURN_IF_ERROR(ld.floats(p + "ffn_norm.weight", {u(c.dim)}, &bw->ffn_norm));
  DSV4_RETURN_IF_ERROR(load_hc(ld, p, "attn", n_mix, 3, c, &bw->hc_attn));
  DSV4_RETURN_IF_ERROR(load_hc(ld, p, "ffn", n_mix, 3, c, &bw->hc_ffn));

  AttentionWeights& a = bw->attn;
  const std::string ap = p + "attn.";
  DSV4_RETURN_IF_ERROR(ld.floats(ap + "attn_sink", {u(c.n_heads)}, &a.sink));
  DSV4_RETURN_IF_ERROR(ld.linear(ap + "wq_a", c.q_lora_rank, c.dim, LinearKind::kQuantized, &a.wq_a));
  DSV4_RETURN_IF_ERROR(ld.floats(ap + "q_norm.weight", {u(c.q_lora_rank)}, &a.q_norm));
  DSV4_RETURN_IF_ERROR(ld.linear(ap + "wq_b", c.n_heads * c.head_dim, c.q_lora_rank, LinearKind::kQuantized, &a.wq_b));
  DSV4_RETURN_IF_ERROR(ld.linear(ap + "wkv", c.head_dim, c.dim, LinearKind::kQuantized, &a.wkv));
  DSV4_RETURN_IF_ERROR(ld.floats(ap + "kv_norm.weight", {u(c.head_dim)}, &a.kv_norm));
  DSV4_RETURN_IF_ERROR(ld.wo_a(ap + "wo_a", c.o_groups * c.o_lora_rank, c.n_heads * c.head_dim / c.o_groups, c.o_lora_rank, &a.wo_a));
  DSV4_RETURN_IF_ERROR(ld.linear(ap + "wo_b", c.dim, c.o_groups * c.o_lora_rank, LinearKind::kQuantized, &a.wo_b));
  const int64_t ratio = c.compress_ratio(il);
  if (ratio > 0) {
    a.has_compressor = true;
    DSV4_RETURN_IF_ERROR(load_compressor(ld, ap + "compressor.", ratio, c.head_dim, c, &a.compressor));
    if (ratio == 4) {  // CSA: the lightning indexer (spec §2.6)
      a.has_indexer = true;
      const std::string ip = ap + "indexer.";
      DSV4_RETURN_IF_ERROR(ld.linear(ip + "wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
                                     LinearKind::kQuantized, &a.indexer.wq_b));
      DSV4_RETURN_IF_ERROR(ld.linear(ip + "weights_proj", c.index_n_heads, c.dim, LinearKind::kBf16,
                                     &a.indexer.weights_proj));
      DSV4_RETURN_IF_ERROR(load_compressor(ld, ip + "compressor.", ratio, c.index_head_dim, c, &a.indexer.compressor));
    }
  }

  MoeWeights& m = bw->moe;
  const std::string fp = p + "ffn.";
  DSV4_RETURN_IF_ERROR(ld.linear(fp + "gate", c.n_routed_experts, c.dim, LinearKind::kF32Gemm, &m.gate));
  if (c.is_hash_layer(il)) {
    DSV4_RETURN_IF_ERROR(ld.tid2eid(fp + "gate.tid2eid", c.vocab_size, c.n_activated_experts, c.n_routed_experts, &m.tid2eid));
  } else {
    DSV4_RETURN_IF_ERROR(ld.floats(fp + "gate.bias", {u(c.n_routed_experts)}, &m.bias));
  }
  m.experts.resize(static_cast<size_t>(c.n_routed_experts));
  for (int64_t e = 0; e < c.n_routed_experts; ++e)
    DSV4_RETURN_IF_ERROR(load_expert(ld, fp + "experts." + std::to_string(e) + ".", LinearKind::kExpert, c,
                                     &m.experts[static_cast<size_t>(e)]));
  DSV4_RETURN_IF_ERROR(load_expert(ld, fp + "shared_experts.", LinearKind::kQuantized, c, &m.shared));
  // kernels::moe_layer takes FP4 routed experts and an FP8 shared expert (the official layout); other
  // layouts run expert by expert through the linear dispatch.
  const auto is = [](const ExpertWeights& e, WeightFormat f) {
    return e.w1.format == f && e.w2.format == f && e.w3.format == f;
  };
  m.fused = is(m.shared, WeightFormat::kFp8) &&
            std::all_of(m.experts.begin(), m.experts.end(), [&](const ExpertWeights& e) { return is(e, WeightFormat::kFp4); });
  if (m.fused) {
    for (const ExpertWeights& e : m.experts) m.fp4_experts.push_back({e.w1.fp4, e.w3.fp4, e.w2.fp4});
    m.fp8_shared = {m.shared.w1.fp8, m.shared.w3.fp8, m.shared.w2.fp8};
  }
  return Status::ok();
}

}  // namespace

void EmbeddingTable::row(int32_t token, float* out) const {
  const auto i0 = static_cast<size_t>(token) * static_cast<size_t>(dim);
  for (int64_t j = 0; j < dim; ++j) {
    const size_t i = i0 + static_cast<size_t>(j);
    if (dtype == DType::kF32) {
      std::memcpy(&out[j], data + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      out[j] = dtype == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
}

Result<std::unique_ptr<ModelWeights>> load_model_weights(std::shared_ptr<const Checkpoint> ckp, const ModelConfig& c,
                                                         Backend backend) {
  if (c.has_dspark())
    return unimplemented("model.dspark", "DSpark (V4-Flash-0731) MTP stages are not supported by this build");
  if (c.score_func != "sqrtsoftplus")
    return unimplemented("model.score_func", "gate score function '" + c.score_func + "' is not supported (sqrtsoftplus only)");
  if (c.n_shared_experts != 1)
    return unimplemented("model.shared_experts", "exactly one shared expert is supported (reference asserts it)");
  Loader ld(*ckp, backend);
  auto w = std::make_unique<ModelWeights>();
  w->checkpoint = std::move(ckp);
  DSV4_RETURN_IF_ERROR(ld.embedding("embed.weight", c.vocab_size, c.dim, &w->embed));
  DSV4_RETURN_IF_ERROR(ld.linear("head", c.vocab_size, c.dim, LinearKind::kF32Gemm, &w->head));
  DSV4_RETURN_IF_ERROR(ld.floats("norm.weight", {u(c.dim)}, &w->norm));
  DSV4_RETURN_IF_ERROR(load_hc(ld, "", "head", c.hc_mult, 1, c, &w->hc_head));
  w->layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il)
    DSV4_RETURN_IF_ERROR(load_block(ld, "layers." + std::to_string(il) + ".", il, c, &w->layers[static_cast<size_t>(il)]));
  w->mtp.resize(static_cast<size_t>(c.n_mtp_layers));
  for (int64_t k = 0; k < c.n_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    MtpWeights& m = w->mtp[static_cast<size_t>(k)];
    DSV4_RETURN_IF_ERROR(load_block(ld, p, c.n_layers + k, c, &m.block));
    DSV4_RETURN_IF_ERROR(ld.linear(p + "e_proj", c.dim, c.dim, LinearKind::kQuantized, &m.e_proj));
    DSV4_RETURN_IF_ERROR(ld.linear(p + "h_proj", c.dim, c.dim, LinearKind::kQuantized, &m.h_proj));
    DSV4_RETURN_IF_ERROR(ld.floats(p + "enorm.weight", {u(c.dim)}, &m.enorm));
    DSV4_RETURN_IF_ERROR(ld.floats(p + "hnorm.weight", {u(c.dim)}, &m.hnorm));
    DSV4_RETURN_IF_ERROR(ld.floats(p + "norm.weight", {u(c.dim)}, &m.norm));
    DSV4_RETURN_IF_ERROR(load_hc(ld, p, "head", c.hc_mult, 1, c, &m.hc_head));
  }
  return w;
}

}  // namespace dsv4
