// model/deepseek_v4: teacher-forced module runs and golden-layout trace files.
#include "model/deepseek_v4/teacher.h"

#include <algorithm>
#include <string>

#include "io/npy.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/mtp.h"
#include "model/model.h"

namespace dsv4::v4 {
namespace {

Result<std::vector<float>> read_golden(const std::filesystem::path& dir, const std::string& name, uint64_t n_elems) {
  DSV4_ASSIGN_OR_RETURN(NpyArray a, read_npy(dir / (name + ".npy")));
  if (a.n_elements() != n_elems)
    return invalid_file("teacher.shape", name + ".npy has " + std::to_string(a.n_elements()) + " elements, expected " +
                                             std::to_string(n_elems));
  return a.to_f32();
}

}  // namespace

Result<TeacherResult> run_teacher_forced(const Model& model, const std::filesystem::path& golden_dir,
                                         const std::vector<int32_t>& tokens) {
  const ModelContext& ctx = model.context();
  const ModelConfig& c = ctx.cfg;
  const ModelWeights& w = model.weights();
  const auto dir = std::filesystem::exists(golden_dir / "intermediates") ? golden_dir / "intermediates" : golden_dir;
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t d = c.dim, hc = c.hc_mult, K = c.n_activated_experts, V = c.vocab_size;
  const auto sz = [](int64_t v) { return static_cast<size_t>(v); };
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return invalid_argument("teacher.token_range", "token id outside the vocabulary");
  if (n < 2) return invalid_argument("teacher.too_short", "teacher forcing needs at least 2 tokens");

  TeacherResult res;
  res.layers.resize(sz(c.n_layers));
  std::vector<float> H_in(sz(n * hc * d));
  for (int64_t i = 0; i < n; ++i) {
    w.embed.row(tokens[sz(i)], H_in.data() + i * hc * d);
    for (int64_t j = 1; j < hc; ++j) std::copy_n(H_in.data() + i * hc * d, d, H_in.data() + (i * hc + j) * d);
  }
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const std::string L = "L" + std::to_string(il) + "_";
    if (il > 0) {
      DSV4_ASSIGN_OR_RETURN(H_in, read_golden(dir, "L" + std::to_string(il - 1) + "_block_out", sz(n * hc * d)));
    }
    DSV4_ASSIGN_OR_RETURN(auto g_y, read_golden(dir, L + "hc_pre_attn_y", sz(n * d)));
    DSV4_ASSIGN_OR_RETURN(auto g_post, read_golden(dir, L + "hc_attn_post", sz(n * hc)));
    DSV4_ASSIGN_OR_RETURN(auto g_comb, read_golden(dir, L + "hc_attn_comb", sz(n * hc * hc)));
    DSV4_ASSIGN_OR_RETURN(auto g_attn, read_golden(dir, L + "attn_out", sz(n * d)));
    DSV4_ASSIGN_OR_RETURN(auto g_y2, read_golden(dir, L + "hc_pre_ffn_y", sz(n * d)));
    const BlockWeights& bw = w.layers[sz(il)];
    BlockTrace& t = res.layers[sz(il)];
    t.hc_pre_attn_y.resize(sz(n * d)), t.hc_attn_post.resize(sz(n * hc)), t.hc_attn_comb.resize(sz(n * hc * hc));
    hc_pre_tokens(ctx, bw.hc_attn, H_in.data(), n, t.hc_pre_attn_y.data(), t.hc_attn_post.data(), t.hc_attn_comb.data());
    LayerState st;
    attention_state_init(ctx, bw.attn, nullptr, &st);
    t.attn_out.resize(sz(n * d));
    attention_sublayer(ctx, il, bw, &st, g_y.data(), 0, n, t.attn_out.data(), &t.indexer);
    std::vector<float> H_mid(sz(n * hc * d));
    hc_post_tokens(ctx, g_attn.data(), H_in.data(), g_post.data(), g_comb.data(), n, H_mid.data());
    t.hc_pre_ffn_y.resize(sz(n * d)), t.hc_ffn_post.resize(sz(n * hc)), t.hc_ffn_comb.resize(sz(n * hc * hc));
    hc_pre_tokens(ctx, bw.hc_ffn, H_mid.data(), n, t.hc_pre_ffn_y.data(), t.hc_ffn_post.data(), t.hc_ffn_comb.data());
    t.moe_out.resize(sz(n * d)), t.gate_indices.resize(sz(n * K)), t.gate_weights.resize(sz(n * K));
    moe_sublayer(ctx, il, bw, g_y2.data(), tokens.data(), n, t.moe_out.data(), t.gate_indices.data(), t.gate_weights.data());
    // Block output from this layer's own module outputs on the golden block input.
    std::vector<float> H_own(sz(n * hc * d));
    hc_post_tokens(ctx, t.attn_out.data(), H_in.data(), t.hc_attn_post.data(), t.hc_attn_comb.data(), n, H_own.data());
    t.block_out.resize(sz(n * hc * d));
    hc_post_tokens(ctx, t.moe_out.data(), H_own.data(), t.hc_ffn_post.data(), t.hc_ffn_comb.data(), n, t.block_out.data());
  }
  DSV4_ASSIGN_OR_RETURN(auto H_final, read_golden(dir, "L" + std::to_string(c.n_layers - 1) + "_block_out", sz(n * hc * d)));
  res.head_logits.resize(sz(n * V));
  head_logits(ctx, w.hc_head, w.norm, w.head, H_final.data(), n, res.head_logits.data());
  if (!w.mtp.empty()) {
    LayerState st;
    attention_state_init(ctx, w.mtp[0].block.attn, nullptr, &st);
    res.mtp_logits.resize(sz((n - 1) * V));
    const BlockSegment seg{&st, 0, n - 1, 0};
    mtp_forward(ctx, 0, w, std::span<const BlockSegment>(&seg, 1), H_final.data(), tokens.data() + 1, n - 1,
                res.mtp_logits.data());
  }
  return res;
}

Status write_intermediates(const std::filesystem::path& dir, const std::vector<BlockTrace>& layers, int64_t n,
                           int64_t hc, int64_t dim, int64_t top_k) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("teacher.mkdir", "cannot create " + dir.string() + ": " + ec.message());
  const auto un = static_cast<uint64_t>(n), uh = static_cast<uint64_t>(hc), ud = static_cast<uint64_t>(dim),
             uk = static_cast<uint64_t>(top_k);
  for (size_t il = 0; il < layers.size(); ++il) {
    const BlockTrace& t = layers[il];
    const auto p = [&](const std::string& name) { return dir / ("L" + std::to_string(il) + "_" + name + ".npy"); };
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_pre_attn_y"), {un, ud}, t.hc_pre_attn_y.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_attn_post"), {un, uh}, t.hc_attn_post.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_attn_comb"), {un, uh, uh}, t.hc_attn_comb.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("attn_out"), {un, ud}, t.attn_out.data()));
    if (t.indexer.width > 0) {
      std::vector<int32_t> ids = t.indexer.ids;
      for (int32_t& v : ids) v = v < 0 ? -1 : static_cast<int32_t>(v + n);  // prefill KV buffer offset
      DSV4_RETURN_IF_ERROR(write_npy_i32(p("indexer_topk"), {un, static_cast<uint64_t>(t.indexer.width)}, ids.data()));
    }
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_pre_ffn_y"), {un, ud}, t.hc_pre_ffn_y.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_ffn_post"), {un, uh}, t.hc_ffn_post.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("hc_ffn_comb"), {un, uh, uh}, t.hc_ffn_comb.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("moe_out"), {un, ud}, t.moe_out.data()));
    DSV4_RETURN_IF_ERROR(write_npy_i32(p("gate_indices"), {un, uk}, t.gate_indices.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("gate_weights"), {un, uk}, t.gate_weights.data()));
    DSV4_RETURN_IF_ERROR(write_npy_f32(p("block_out"), {un, uh, ud}, t.block_out.data()));
  }
  return Status::ok();
}

}  // namespace dsv4::v4
