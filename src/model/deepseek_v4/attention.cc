// model/deepseek_v4: attention module (spec §2.3–2.8).
#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/head_norm.h"
#include "kernels/cpu/kv_row_decode.h"
#include "kernels/cpu/sparse_attention.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/dispatch_profile.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/linear.h"
#include "model/deepseek_v4/scratch.h"
#include "ops/reference/common.h"
#include "ops/reference/norm.h"
#include "ops/reference/rope.h"
#include "ops/reference/sparse_attention.h"

namespace dsv4::v4 {
namespace {

// The whole call's activations, on the calling thread. Grow-only: a warm step allocates nothing (trimmed
// at the end of a forward once steps keep using much less).
struct CallScratch {
  ScratchVec<float> qr, q, kv, o, z;  // trimmable: [n, ·] — ~268 MB each for q and o at a 2048-row prefill
  ScratchVec<float> rope_cs;          // [n, rope_dim]: each row's RoPE cos / sin (ref::rope_cos_sin)
  IndexerProjection iproj;
  CompressorProjection cproj;
};

// One sequence's working set, per thread (the sequences of a decode batch run side by side on the pool).
struct SegmentScratch {
  kernels::SparseAttentionScratch attention;
  std::vector<const float*> rows;       // one query's index list
  std::vector<float> comp;              // decoded compressed rows
  std::vector<const float*> comp_rows;  // HCA: every stored entry, decoded once per call
  std::vector<float> prev;              // window rows of earlier calls, decoded
  std::vector<std::vector<int32_t>> selected;  // CSA: each query's entries
};

// Rows ids[0..n) of `table` decoded into out [n, dims]: FP8 tables through the vector decode (bit-identical
// with KvPageTable::read: kernels/cpu/kv_row_decode.h), the others through the table. id(i) gives the i-th row;
// room: the most rows the caller's buffers hold before they next grow (so this list grows with them, not at
// every new row of a warm decode: StepAllocations).
template <typename Id>
void read_rows(const KvPageTable& table, int64_t n, int64_t room, Id id, float* out, kernels::Isa isa) {
  const int64_t dims = table.pool().layout().dims;
  if (table.pool().storage() != KvStorage::kFp8) {
    for (int64_t i = 0; i < n; ++i) table.read(id(i), out + i * dims);
    return;
  }
  thread_local std::vector<const uint8_t*> entries;
  const uint8_t** e = grow_only(entries, n, room);
  for (int64_t i = 0; i < n; ++i) e[i] = table.row_bytes(id(i));
  kernels::decode_kv_rows(table.pool().layout(), e, n, out, isa);
}

// fn(v) for every head vector v in [0, n_vectors) of the call's rows, a few µs of work per pool chunk.
template <typename Fn>
void for_heads(const ModelContext& ctx, int64_t n_vectors, Fn&& fn) {
  for_each_item(ctx.exec, n_vectors, 8, fn);
}

}  // namespace

void attention_state_init(const ModelContext& ctx, const AttentionWeights& w, StatePools* pools, LayerState* st) {
  // The window keeps the last window_size rows: keep_from(n) = n − window_size.
  const SlidePolicy slide{1, ctx.cfg.window_size - 1};
  st->window = KvPageTable(pools != nullptr ? pools->window
                                            : std::make_shared<KvPagePool>(KvRowLayout{ctx.cfg.head_dim, 0}, KvStorage::kF32),
                           slide);
  if (w.has_compressor) compressor_init(w.compressor, CompressorKind::kMain, pools, &st->compressor);
  if (w.has_indexer) compressor_init(w.indexer.compressor, CompressorKind::kIndexer, pools, &st->index_keys);
}

void attention_forward(const ModelContext& ctx, int64_t il, const AttentionWeights& w, std::span<const BlockSegment> segs,
                       const float* x, int64_t n_rows, float* out, IndexerSelection* selection) {
  const ModelConfig& c = ctx.cfg;
  const int64_t H = c.n_heads, D = c.head_dim, rd = c.rope_head_dim, win = c.window_size;
  const auto& freqs = ctx.rope_for_layer(il);
  const float eps = static_cast<float>(c.norm_eps);
  const int64_t n = n_rows;
  const DispatchProfile::Scope timed(Phase::kAttnCore);  // the linears inside charge kAttnLinear

  // Every linear below runs once over all rows of the batch: rows are independent in every linear kernel
  // (activation quantization is per row), so this is bit-identical to projecting each sequence alone.
  // The projections are independent linears in two waves — of x (wq_a, wkv, the compressor's and the
  // indexer's), then of the normed qr (wq_b, the indexer's queries) — each wave one dispatch for a decode
  // token (linear_jobs); the norms between them and after are per row, so the order changes no bit.
  thread_local CallScratch call;
  thread_local std::vector<LinearJob> x_jobs, qr_jobs;
  x_jobs.clear();
  qr_jobs.clear();
  float* qr = grow_only(call.qr, n * c.q_lora_rank);  // [n, q_lora_rank]
  float* q = grow_only(call.q, n * H * D);            // [n, H, D]
  float* kv = grow_only(call.kv, n * D);              // [n, D]
  x_jobs.push_back({&w.wq_a, x, qr});
  x_jobs.push_back({&w.wkv, x, kv});
  qr_jobs.push_back({&w.wq_b, qr, q});
  IndexerProjection& iproj = call.iproj;
  if (w.has_indexer) indexer_project_jobs(ctx, w.indexer, x, qr, n, &iproj, &x_jobs, &qr_jobs);
  CompressorProjection& cproj = call.cproj;
  if (w.has_compressor) compressor_project_jobs(w.compressor, x, n, &cproj, &x_jobs);
  linear_jobs(ctx.exec, x_jobs, n);
  // 1. Query latent qr = RMSNorm_q(wq_a·x) (the indexer reuses it).
  ref::rms_norm(qr, n, c.q_lora_rank, w.q_norm.data(), eps, qr);
  // 3. Shared K=V latent: RMSNorm_kv(wkv·x) (RoPE tail and FP8 simulation per sequence below).
  ref::rms_norm(kv, n, D, w.kv_norm.data(), eps, kv);
  if (w.has_indexer) indexer_project_finish(ctx, &iproj);
  linear_jobs(ctx.exec, qr_jobs, n);
  // Each row's position, for the per-head passes below.
  thread_local std::vector<int64_t> row_pos_buf;
  int64_t* row_pos = grow_only(row_pos_buf, n);  // this thread's buffer: the lambdas below run on pool workers
  for (const BlockSegment& seg : segs)
    for (int64_t i = 0; i < seg.n; ++i) row_pos[seg.row0 + i] = seg.start + i;
  // 2. Query heads: per-head RMS in bf16 steps, then RoPE on the tail at the row's position — each head
  // vector on its own, so the pool splits them (a decode token's 64 heads no longer run on one thread). The
  // cos / sin of a row's position are computed once for its heads, its KV row, the indexer's query heads and
  // the outputs' de-rotation below (apply_rope's bits; each of those took its own double sin + cos before).
  float* rope_cs = grow_only(call.rope_cs, n * rd);  // [n, rd]
  for (int64_t r = 0; r < n; ++r) ref::rope_cos_sin(rd, freqs.data(), row_pos[r], rope_cs + r * rd);
  // cpu backend: the kernels that give the reference's bits on every ISA — the query norm, 8 head vectors at
  // a time (kernels/cpu/head_norm.h), and the stored rows' decode below — run on the model's ISA; the
  // reference backend keeps the reference's own loops.
  const bool fast = ctx.exec.backend == Backend::kCpu;
  const kernels::Isa exact_isa = fast ? ctx.exec.isa : kernels::Isa::kScalar;
  for_each_item(ctx.exec, (n * H + 7) / 8, 2, [&](int64_t g) {  // a decode token's 8 groups still split
    const int64_t v0 = 8 * g, v1 = std::min(n * H, v0 + 8);
    kernels::head_rms_norm_bf16(q + v0 * D, v1 - v0, D, eps, exact_isa);
    for (int64_t v = v0; v < v1; ++v) ref::apply_rope_cs(q + v * D + D - rd, rd, rope_cs + (v / H) * rd, false);
  });

  const int64_t ratio = c.compress_ratio(il);
  const int64_t win_cols = win;
  ref::SparseAttentionParams ap{H, D, static_cast<float>(std::pow(static_cast<double>(D), -0.5))};
  // cpu backend: the vectorised kernel (kernels/cpu/sparse_attention.h: bit-identical with the scalar ISA,
  // within its documented bound otherwise), heads split over the model's pool.
  const kernels::AttentionOptions kopt{ctx.exec.isa, ctx.exec.pool};
  float* o = grow_only(call.o, n * H * D);  // [n, H, D]

  // One sequence's rows [row0, row0 + sn) at positions start..: writes only those rows of q, kv, iproj, o.
  auto attend = [&](const BlockSegment& seg) {
    LayerState* st = seg.state;
    const int64_t row0 = seg.row0, sn = seg.n, start = seg.start;
    float* sq = q + row0 * H * D;
    float* skv = kv + row0 * D;
    float* so = o + row0 * H * D;
    thread_local SegmentScratch seg_scratch;
    SegmentScratch& ss = seg_scratch;
    for (int64_t i = 0; i < sn; ++i) {
      float* row = skv + i * D;
      ref::apply_rope_cs(row + D - rd, rd, rope_cs + (row0 + i) * rd, false);
      fake_quant_fp8(std::span<float>(row, static_cast<size_t>(D - rd)), 64);
    }

    // 4. Compressed entries: CSA selects with the indexer, HCA sees every visible entry.
    std::vector<std::vector<int32_t>>& selected = ss.selected;
    if (w.has_indexer)
      indexer_select(ctx, il, w.indexer, st, &iproj, row0, start, sn, rope_cs + row0 * rd, &selected,
                     selection ? &selection->scores : nullptr);
    if (w.has_compressor)
      compressor_consume(w.compressor, CompressorKind::kMain, rd, eps, freqs, &st->compressor, cproj, row0, start, sn);
    if (selection) {
      selection->width = w.has_indexer ? std::min<int64_t>(c.index_topk, (start + sn) / ratio) : 0;
      selection->ids.assign(static_cast<size_t>(sn * selection->width), -1);
      for (int64_t i = 0; w.has_indexer && i < sn; ++i)
        std::copy(selected[static_cast<size_t>(i)].begin(), selected[static_cast<size_t>(i)].end(),
                  selection->ids.begin() + i * selection->width);
    }

    // 5. Per query: the index list [window (chronological, −1 padded to window_size) ‖ compressed], as the
    // reference decode lays it out; its order fixes the 64-block partition of the online softmax (golden
    // README item 12). The reference prefill pads the window only to min(S, window_size); the two agree
    // whenever S ≥ window_size (every golden prefill), and using the decode layout everywhere makes one-shot
    // prefill, chunks and decode bit-identical for every window size.
    kernels::SparseAttentionScratch& scratch = ss.attention;
    std::vector<const float*>& rows = ss.rows;
    // Compressed rows are stored as FP8 pages; the ones a query reads are decoded (losslessly) into
    // scratch: HCA's every row once per call, CSA's selected rows per query.
    const CompressorState& stored = st->compressor;
    std::vector<float>& comp = ss.comp;
    std::vector<const float*>& comp_rows = ss.comp_rows;
    // Room for every entry the held pages can take, so these grow only when the table takes a page.
    const int64_t comp_room = rows_until_next_page(stored.rows);
    rows.reserve(static_cast<size_t>(win_cols + std::max<int64_t>(comp_room, c.index_topk)));
    if (w.has_compressor && !w.has_indexer) {
      float* dst = grow_only(comp, stored.n_entries * D, comp_room * D);
      grow_only(comp_rows, stored.n_entries, comp_room);
      const auto entry_t = [](int64_t t) { return t; };
      read_rows(stored.rows, stored.n_entries, comp_room, entry_t, dst, exact_isa);
      for (int64_t t = 0; t < stored.n_entries; ++t) comp_rows[static_cast<size_t>(t)] = dst + t * D;
    }
    // Window rows of earlier calls [w0, start): stored FP8 (lossless), decoded once for all queries.
    const int64_t w0 = std::max<int64_t>(0, start - win + 1);
    float* prev = grow_only(ss.prev, (start - w0) * D, (win - 1) * D);  // [start − w0, D]
    const auto window_row = [w0](int64_t i) { return w0 + i; };
    read_rows(st->window, start - w0, win - 1, window_row, prev, exact_isa);
    for (int64_t i = 0; i < sn; ++i) {
      const int64_t pos = start + i;
      rows.clear();
      const int64_t first = std::max<int64_t>(0, pos - win + 1);
      for (int64_t p = first; p <= pos; ++p)
        rows.push_back(p >= start ? skv + (p - start) * D : prev + (p - w0) * D);
      while (static_cast<int64_t>(rows.size()) < win_cols) rows.push_back(nullptr);
      if (w.has_indexer) {
        const auto& sel = selected[static_cast<size_t>(i)];
        const auto n_sel = static_cast<int64_t>(sel.size());
        grow_only(comp, n_sel * D, c.index_topk * D);
        const auto selected_row = [&sel](int64_t j) { return static_cast<int64_t>(sel[static_cast<size_t>(j)]); };
        read_rows(stored.rows, n_sel, c.index_topk, selected_row, comp.data(), exact_isa);
        for (int64_t j = 0; j < n_sel; ++j) rows.push_back(comp.data() + j * D);
      } else if (w.has_compressor) {
        const int64_t visible = (pos + 1) / ratio;
        rows.insert(rows.end(), comp_rows.begin(), comp_rows.begin() + visible);
      }
      if (fast) {
        kernels::sparse_attention({H, D, ap.scale}, sq + i * H * D, rows.data(), static_cast<int64_t>(rows.size()),
                                  w.sink.data(), so + i * H * D, scratch, kopt);
      } else {
        ref::sparse_attention(ap, sq + i * H * D, rows.data(), static_cast<int64_t>(rows.size()), w.sink.data(),
                              so + i * H * D);
      }
    }
    // The window takes this call's rows only after every query has read the old ones; rows that slid
    // out of it release their pages as it goes.
    for (int64_t i = 0; i < sn; ++i) st->window.append(std::span<const float>(skv + i * D, static_cast<size_t>(D)));
  };
  // Sequences side by side on the pool: always on the reference backend, whose ops are single-threaded,
  // and on the cpu backend for decode-sized batches (at least as many sequences as threads, each a few
  // rows: too little work to split by heads without a pool wake-up per kernel call; the kernels then run
  // on their chunk's thread). Otherwise (prefill chunks) the cpu kernels split each sequence's heads.
  // Sequences touch disjoint rows and state, and every kernel gives the same bits on any thread.
  constexpr int64_t kMaxDecodeRows = 8;  // a decode step's rows per sequence, MTP drafts included
  const auto n_segs = static_cast<int64_t>(segs.size());
  bool small_segs = true;
  for (const BlockSegment& s : segs) small_segs &= s.n <= kMaxDecodeRows;
  const bool by_sequence =
      ctx.exec.pool != nullptr && n_segs > 1 &&
      (ctx.exec.backend == Backend::kReference || (small_segs && n_segs >= ctx.exec.pool->n_threads()));
  if (by_sequence) {
    ctx.exec.pool->parallel_for(n_segs, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t s = b; s < e; ++s) attend(segs[static_cast<size_t>(s)]);
    });
  } else {
    for (const BlockSegment& s : segs) attend(s);
  }

  // De-rotate the outputs, head by head like the queries.
  for_heads(ctx, n * H, [&](int64_t v) { ref::apply_rope_cs(o + v * D + D - rd, rd, rope_cs + (v / H) * rd, true); });

  // 6. Grouped low-rank output over all rows: z_g = Wo_a[g]·o_g (bf16 einsum), then out = wo_b·z.
  const int64_t G = c.o_groups, R = c.o_lora_rank;
  float* z = grow_only(call.z, n * G * R);
  // o [n, G, H·D/G] → z [n, G, R]: bf16 weights, no activation quantization, bf16 output.
  grouped_linear(ctx.exec, w.wo_a, G, o, n, z);
  linear(ctx.exec, w.wo_b, z, n, out);
}

}  // namespace dsv4::v4
