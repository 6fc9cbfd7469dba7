// model: parameter, byte, KV and FLOP arithmetic for V4 configs and for V3.2-Exp (spec §1, §4, §5).
#include "model/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/kv_row.h"
#include "model/tensor_layout.h"

namespace dsv4 {
namespace {

uint64_t u(int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); }
double mac(double a, double b) { return 2.0 * a * b; }  // FLOPs of an a x b matrix-vector product

}  // namespace

ParamCost param_cost(const ModelConfig& cfg) {
  ParamCost c;
  for_each_expected_tensor(cfg, [&](const ExpectedTensor& t) {
    ++c.n_tensors;
    c.bytes_total += t.n_bytes();
    c.bytes_by_dtype[std::string(dtype_name(t.dtype))] += t.n_bytes();
    const uint64_t p = t.n_params();
    if (t.is_mtp(cfg)) {
      c.params_mtp += p;
      return;
    }
    c.params_total += p;
    if (t.name == "embed.weight") c.params_embedding += p;
    if (t.expert >= 0) c.params_routed_experts += p;
  });
  // Unselected routed experts are the only backbone weights a token does not touch.
  const long double active_frac =
      cfg.n_routed_experts > 0 ? static_cast<long double>(cfg.n_activated_experts) / cfg.n_routed_experts : 0.0L;
  const auto unused = static_cast<uint64_t>(c.params_routed_experts * (1.0L - active_frac) + 0.5L);
  c.params_active_with_embedding = c.params_total - unused;
  c.params_active_per_token = c.params_active_with_embedding - c.params_embedding;
  return c;
}

std::string_view kv_layout_name(KvLayout layout) {
  return layout == KvLayout::kFp8 ? "fp8" : "bf16";
}

uint64_t kv_row_bytes(const ModelConfig& cfg, KvLayout layout) {
  if (layout == KvLayout::kBf16Reference) return u(cfg.head_dim) * 2;
  // spec §4 [3P] FlashMLA "MODEL1": E4M3 nope dims, BF16 rope dims, one ue8m0 per 64 nope dims, padded
  // to 8 bytes: 448 + 128 + 7 + 1 = 584 for the official 512-dim row. Lossless w.r.t. the QAT grid.
  // The layout the model's KV page store uses (core/kv_row.h).
  return u(KvRowLayout{cfg.head_dim, cfg.rope_head_dim}.bytes());
}

uint64_t indexer_key_bytes(const ModelConfig& cfg, KvLayout layout) {
  const uint64_t d = u(cfg.index_head_dim);
  if (layout == KvLayout::kBf16Reference) return d * 2;
  // The reference FP4-simulates keys (spec §2.5 step 3), so packed E2M1 + ue8m0 per 32 is exact.
  return d / 2 + d / 32;
}

KvCost kv_cost(const ModelConfig& cfg, int64_t context, KvLayout layout) {
  KvCost k;
  const uint64_t n = u(context);
  const uint64_t row = kv_row_bytes(cfg, layout), ikey = indexer_key_bytes(cfg, layout);
  for (int64_t il = 0; il < cfg.n_total_layers(); ++il) {
    const int64_t r = cfg.compress_ratio(il);
    k.window_bytes += std::min(n, u(cfg.window_size)) * row;
    if (r <= 0) continue;
    const uint64_t entries = n / u(r);
    const uint64_t c = r == 4 ? 2 : 1;  // overlap compressor keeps two halves (spec §2.5)
    k.compressed_bytes += entries * row;
    // Partial-block state: kv and score, f32 [c*r, c*dc] each (spec §4 table).
    k.state_bytes += 2 * (c * u(r)) * (c * u(cfg.head_dim)) * 4;
    if (il < cfg.n_layers) k.bytes_per_token += static_cast<double>(row) / static_cast<double>(r);
    if (r == 4) {
      k.indexer_bytes += entries * ikey;
      k.state_bytes += 2 * (2 * 4) * (2 * u(cfg.index_head_dim)) * 4;
      if (il < cfg.n_layers) k.bytes_per_token += static_cast<double>(ikey) / 4.0;
    }
  }
  k.bytes_at_context = k.window_bytes + k.compressed_bytes + k.indexer_bytes + k.state_bytes;
  return k;
}

FlopCost flops_per_token(const ModelConfig& cfg, int64_t context) {
  FlopCost f;
  const double n = static_cast<double>(std::max<int64_t>(context, 1));
  const double d = cfg.dim, hc = cfg.hc_mult, mix = (2 + hc) * hc;
  const double heads = cfg.n_heads, hd = cfg.head_dim, qr = cfg.q_lora_rank;
  const double orank = cfg.o_lora_rank, groups = cfg.o_groups;
  const double ih = cfg.index_n_heads, idim = cfg.index_head_dim;
  const double ffn_expert = 3 * mac(d, cfg.moe_inter_dim);  // w1, w3, w2
  for (int64_t il = 0; il < cfg.n_layers; ++il) {
    const int64_t r = cfg.compress_ratio(il);
    // spec §2.2: per site, the fn GEMV, the pre-weighted sum; hc_post mixes hc streams plus x.
    f.mhc += 2 * (mac(hc * d, mix) + mac(hc, d) + mac(hc + 1, hc * d));
    // spec §2.3: wq_a, wq_b, wkv, grouped wo_a (o_rank x heads*hd/groups per group), wo_b.
    f.projections += mac(d, qr) + mac(qr, heads * hd) + mac(d, hd) + mac(orank, heads * hd) + mac(groups * orank, d);
    double attended = std::min(n, static_cast<double>(cfg.window_size));
    if (r > 0) {
      const double c = r == 4 ? 2 : 1;
      const double entries = std::floor(n / static_cast<double>(r));
      f.compressors += 2 * mac(d, c * hd);  // wkv and wgate on the new token (spec §2.5)
      if (r == 4) {
        attended += std::min(entries, static_cast<double>(cfg.index_topk));
        f.compressors += 2 * mac(d, 2 * idim);  // the indexer's own compressor
        // spec §2.6: q projection, head weights, then every compressed entry scored by every index head
        // (dot, ReLU x weight, sum over heads).
        f.indexer += mac(qr, ih * idim) + mac(d, ih) + entries * ih * (2 * idim + 2);
      } else {
        attended += entries;  // HCA: dense over all compressed entries (spec §2.7)
      }
    }
    f.attention += attended * heads * 4 * hd;  // QK and PV, K = V = the same 512-dim row
    f.moe += mac(d, cfg.n_routed_experts) + (cfg.n_activated_experts + cfg.n_shared_experts) * ffn_expert;
  }
  f.mhc += mac(hc * d, hc) + mac(hc, d);  // hc_head
  f.head = mac(d, cfg.vocab_size);
  return f;
}

FlopCost v32_flops_per_token(const V32Config& c, int64_t context) {
  FlopCost f;
  const double n = static_cast<double>(std::max<int64_t>(context, 1));
  const double d = c.dim, h = c.n_heads, qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
  const double lat = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  for (int64_t il = 0; il < c.n_layers; ++il) {
    // wq_a, wq_b, wkv_a; absorbed W_UK on q_nope and W_UV on the latent output; wo.
    f.projections += mac(d, c.q_lora_rank) + mac(c.q_lora_rank, h * qk) + mac(d, lat + rope) +
                     h * mac(c.qk_nope_head_dim, lat) + h * mac(lat, c.v_head_dim) + mac(h * c.v_head_dim, d);
    const double attended = std::min(n, static_cast<double>(c.index_topk));
    f.attention += attended * h * (2 * (lat + rope) + 2 * lat);
    // spec §5 indexer: wq_b, wk, weights_proj, then every token scored by every index head.
    f.indexer += mac(c.q_lora_rank, c.index_n_heads * c.index_head_dim) + mac(d, c.index_head_dim) +
                 mac(d, c.index_n_heads) + n * c.index_n_heads * (2.0 * c.index_head_dim + 2);
    if (il < c.n_dense_layers)
      f.moe += 3 * mac(d, c.inter_dim);
    else
      f.moe += mac(d, c.n_routed_experts) +
               (c.n_activated_experts + c.n_shared_experts) * 3 * mac(d, c.moe_inter_dim);
  }
  f.head = mac(d, c.vocab_size);
  return f;
}

KvCost v32_kv_cost(const V32Config& c, int64_t context, KvLayout layout) {
  KvCost k;
  const uint64_t lat = u(c.kv_lora_rank), rope = u(c.qk_rope_head_dim);
  const uint64_t row = layout == KvLayout::kFp8 ? lat + 4 * (lat / 128) + 2 * rope : 2 * (lat + rope);
  const uint64_t ikey = u(c.index_head_dim) + 4;  // FP8 key + f32 scale (the reference's own cache)
  const uint64_t n = u(context);
  k.compressed_bytes = u(c.n_layers) * n * row;
  k.indexer_bytes = u(c.n_layers) * n * ikey;
  k.bytes_per_token = static_cast<double>(u(c.n_layers) * (row + ikey));
  k.bytes_at_context = k.compressed_bytes + k.indexer_bytes;
  return k;
}

}  // namespace dsv4
