// model/deepseek_v4: lightning indexer (spec §2.6).
#include "model/deepseek_v4/indexer.h"

#include <cmath>
#include <span>

#include "core/formats.h"
#include "core/quant.h"
#include "model/deepseek_v4/compressor.h"
#include "kernels/cpu/indexer.h"
#include "ops/reference/hadamard.h"
#include "ops/reference/indexer.h"
#include "model/deepseek_v4/linear.h"
#include "model/deepseek_v4/scratch.h"
#include "ops/reference/rope.h"

namespace dsv4::v4 {

void indexer_project_jobs(const ModelContext& ctx, const IndexerWeights& w, const float* x, const float* qr, int64_t n,
                          IndexerProjection* p, std::vector<LinearJob>* x_jobs, std::vector<LinearJob>* qr_jobs) {
  const ModelConfig& c = ctx.cfg;
  const int64_t nh = c.index_n_heads, hd = c.index_head_dim;
  p->q.grow(n * nh * hd);
  qr_jobs->push_back({&w.wq_b, qr, p->q.data()});
  p->weights.grow(n * nh);
  x_jobs->push_back({&w.weights_proj, x, p->weights.data()});
  compressor_project_jobs(w.compressor, x, n, &p->keys, x_jobs);
}

void indexer_project_finish(const ModelContext& ctx, IndexerProjection* p) {
  const int64_t nh = ctx.cfg.index_n_heads, hd = ctx.cfg.index_head_dim;
  const auto scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5) * std::pow(static_cast<double>(nh), -0.5));
  for (float& v : p->weights) v = round_bf16(v * scale);
}

void indexer_project(const ModelContext& ctx, const IndexerWeights& w, const float* x, const float* qr, int64_t n,
                     IndexerProjection* p) {
  thread_local std::vector<LinearJob> x_jobs, qr_jobs;
  x_jobs.clear();
  qr_jobs.clear();
  indexer_project_jobs(ctx, w, x, qr, n, p, &x_jobs, &qr_jobs);
  linear_jobs(ctx.exec, qr_jobs, n);
  linear_jobs(ctx.exec, x_jobs, n);
  indexer_project_finish(ctx, p);
}

void indexer_select(const ModelContext& ctx, int64_t il, const IndexerWeights& w, LayerState* st, IndexerProjection* p,
                    int64_t row0, int64_t start, int64_t n, const float* rope_cs, std::vector<std::vector<int32_t>>* selected,
                    std::vector<std::vector<float>>* all_scores) {
  const ModelConfig& c = ctx.cfg;
  const int64_t nh = c.index_n_heads, hd = c.index_head_dim, rd = c.rope_head_dim;
  const auto& freqs = ctx.rope_for_layer(il);

  // Queries [n, nh, hd]: RoPE on the last rd dims, Hadamard, FP4 simulation — each head vector on its own,
  // so the pool splits them (a decode token's 64 heads; inside a pool chunk — the sequences of a decode
  // batch — parallel_for runs on the calling thread).
  float* q = p->q.data() + row0 * nh * hd;
  const float* wts = p->weights.data() + row0 * nh;
  for_each_item(ctx.exec, n * nh, 8, [&](int64_t v) {  // 8 head vectors per pool chunk at least
    float* qh = q + v * hd;
    ref::apply_rope_cs(qh + hd - rd, rd, rope_cs + (v / nh) * rd, false);
    ref::hadamard_rotate(qh, hd);
    fake_quant_fp4(std::span<float>(qh, static_cast<size_t>(hd)), 32);
  });

  compressor_consume(w.compressor, CompressorKind::kIndexer, rd, static_cast<float>(c.norm_eps), freqs, &st->index_keys,
                     p->keys, row0, start, n);

  // The keys live as packed FP4 pages (fp32 ones with KvStorage::kF32). The cpu backend's scorer reads packed
  // keys in place (kernels/cpu/indexer.h indexer_scores_packed: a pointer per key) where it reads the codes
  // directly, or for a single query; otherwise they are decoded (losslessly) into one contiguous scratch
  // [n_entries, hd], filled once per call, not once per query. Per-thread scratch (sequences of a batch run
  // on separate threads), grown with the key table's pages, so a warm step does not allocate.
  const bool fast = ctx.exec.backend == Backend::kCpu;
  const KvPageTable& stored = st->index_keys.rows;
  const bool packed = fast && stored.pool().storage() == KvStorage::kFp4 &&
                      (kernels::indexer_reads_packed_keys(ctx.exec.isa) || n == 1);
  const int64_t room = rows_until_next_page(stored);  // entries the held pages can take
  thread_local std::vector<float> key_scratch;         // [n_entries, hd] (decoded keys)
  thread_local std::vector<const uint8_t*> key_rows;   // [n_entries] (packed keys in place)
  thread_local std::vector<float> scores;              // [visible]
  thread_local kernels::TopkScratch topk_scratch;
  thread_local ScratchVec<kernels::IndexerKeyLine> prepared;  // the keys converted once for n > 1 queries
  float* keys = nullptr;
  bool use_prepared = false;
  if (packed) {
    grow_only(key_rows, stored.size(), room);
    for (int64_t t = 0; t < stored.size(); ++t) key_rows[static_cast<size_t>(t)] = stored.row_bytes(t);
    // Several queries (prefill) against one key set: where the scorer reads packed keys through a converted
    // form (the AVX-512 VNNI path), convert once per call instead of once per query (~16% of a query's
    // scoring at 16K keys).
    const int64_t lines = n > 1 ? kernels::indexer_prepared_lines(stored.size(), hd, ctx.exec.isa) : 0;
    if (lines > 0) {
      grow_only(prepared, lines, kernels::indexer_prepared_lines(room, hd, ctx.exec.isa));
      kernels::indexer_prepare_packed(key_rows.data(), stored.size(), hd, prepared.data(), {ctx.exec.isa, ctx.exec.pool});
      use_prepared = true;
    }
  } else {
    keys = grow_only(key_scratch, stored.size() * hd, room * hd);
    for (int64_t t = 0; t < stored.size(); ++t) stored.read(t, keys + t * hd);
  }
  if (topk_scratch.keys.capacity() < static_cast<size_t>(room)) {
    topk_scratch.keys.reserve(static_cast<size_t>(room));
    topk_scratch.tied.reserve(static_cast<size_t>(room));  // all of them when the scores tie (zeros)
  }
  topk_scratch.picked.reserve(static_cast<size_t>(c.index_topk));
  topk_scratch.order.reserve(static_cast<size_t>(c.index_topk));

  // Outer and inner vectors keep their capacity: every row's list is resized, then fully overwritten.
  if (selected->size() < static_cast<size_t>(n)) selected->resize(static_cast<size_t>(n));
  if (all_scores) all_scores->assign(static_cast<size_t>(n), {});
  // cpu backend: the vectorised / AMX score kernel and the radix top-k (kernels/cpu/indexer.h: bit-identical
  // to the reference on these FP4-simulated q and keys; same tie rule).
  const kernels::AttentionOptions kopt{ctx.exec.isa, ctx.exec.pool};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t visible = (start + i + 1) / w.compressor.ratio;  // causal rule (spec §2.6 step 7)
    const int64_t k = std::min<int64_t>(c.index_topk, visible);
    grow_only(scores, visible, room);
    auto& sel = (*selected)[static_cast<size_t>(i)];
    grow_only(sel, k, c.index_topk);
    if (use_prepared) {
      kernels::indexer_scores_prepared(q + i * nh * hd, nh, hd, key_rows.data(), prepared.data(), stored.size(), visible,
                                       wts + i * nh, scores.data(), kopt);
    } else if (packed) {
      kernels::indexer_scores_packed(q + i * nh * hd, nh, hd, key_rows.data(), visible, wts + i * nh, scores.data(),
                                     kopt);
    } else if (fast) {
      kernels::indexer_scores(q + i * nh * hd, nh, hd, keys, visible, wts + i * nh, scores.data(), kopt);
    }
    if (fast) {
      kernels::topk_desc(scores.data(), visible, k, sel.data(), topk_scratch);
    } else {
      ref::indexer_scores(q + i * nh * hd, nh, hd, keys, visible,
                          wts + i * nh, scores.data());
      ref::topk_desc(scores.data(), visible, k, sel.data());
    }
    if (all_scores) (*all_scores)[static_cast<size_t>(i)] = scores;
  }
}

}  // namespace dsv4::v4
