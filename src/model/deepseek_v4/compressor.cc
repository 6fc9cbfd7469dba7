// model/deepseek_v4: streaming compressor (spec §2.5, §4).
#include "model/deepseek_v4/compressor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"
#include "kernels/cpu/compress_pool.h"
#include "model/deepseek_v4/linear.h"
#include "ops/reference/hadamard.h"
#include "ops/reference/norm.h"
#include "ops/reference/rope.h"

namespace dsv4::v4 {

int32_t partial_page_rows(int64_t ratio) {
  return static_cast<int32_t>(std::gcd(ratio, int64_t{16}));
}

void compressor_init(const CompressorWeights& w, CompressorKind kind, StatePools* pools, CompressorState* st) {
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  const int32_t pr = partial_page_rows(w.ratio);
  const SlidePolicy slide{w.ratio, w.overlap ? w.ratio : 0};
  if (pools != nullptr) {
    st->partial = KvPageTable(pools->partial_pool(2 * width, pr), slide);
    st->rows = KvPageTable(kind == CompressorKind::kMain ? pools->main_rows : pools->index_keys);
  } else {
    st->partial = KvPageTable(std::make_shared<KvPagePool>(KvRowLayout{2 * width, 0}, KvStorage::kF32, pr), slide);
    st->rows = KvPageTable(std::make_shared<KvPagePool>(KvRowLayout{w.head_dim, 0}, KvStorage::kF32));
  }
  st->n_entries = 0;
}

namespace {

// Pools the completed block b held in the state, then norm → RoPE at b·r → quantization simulation.
void emit_entry(const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                const std::vector<float>& freqs, CompressorState* st, int64_t b) {
  const int64_t r = w.ratio, dc = w.head_dim;
  thread_local std::vector<float> out;  // [dc], grow-only
  out.resize(static_cast<size_t>(dc));
  // The pooling reads the candidates in place (kernels/cpu/compress_pool.h: bit-identical to
  // ref::compress_pool on every ISA, so both backends keep the reference's bits): the partial rows
  // [kv | score + ape] (`width` each) in their pages. Overlap: 2r candidates, block b−1 with its
  // first-half channels, block b with its second-half channels; non-overlap: the r tokens.
  const int64_t width = (w.overlap ? 2 : 1) * dc;
  const int64_t n_cand = (w.overlap ? 2 : 1) * r;
  const KvPageTable& part = st->partial;
  thread_local std::vector<const float*> kv_rows, sc_rows;  // grow-only
  thread_local std::vector<float> zeros, neg_inf;           // block −1 of the overlap
  kv_rows.resize(static_cast<size_t>(n_cand));
  sc_rows.resize(static_cast<size_t>(n_cand));
  if (w.overlap && b == 0) {  // block −1 does not exist: value 0, score −inf (spec §2.5)
    zeros.assign(static_cast<size_t>(dc), 0.0f);
    neg_inf.assign(static_cast<size_t>(dc), -INFINITY);
  }
  for (int64_t j = 0; j < r; ++j) {
    const float* cur = part.row_f32(b * r + j);
    if (w.overlap) {
      const float* prev = b > 0 ? part.row_f32((b - 1) * r + j) : nullptr;
      kv_rows[static_cast<size_t>(j)] = prev ? prev : zeros.data();
      sc_rows[static_cast<size_t>(j)] = prev ? prev + width : neg_inf.data();
      kv_rows[static_cast<size_t>(r + j)] = cur + dc;
      sc_rows[static_cast<size_t>(r + j)] = cur + width + dc;
    } else {
      kv_rows[static_cast<size_t>(j)] = cur;
      sc_rows[static_cast<size_t>(j)] = cur + width;
    }
  }
  kernels::compress_pool(kv_rows.data(), sc_rows.data(), n_cand, dc, out.data());
  for (float& v : out) v = round_bf16(v);  // kv.to(bf16) before the norm
  ref::rms_norm(out.data(), 1, dc, w.norm.data(), norm_eps, out.data());
  ref::apply_rope(out.data() + dc - rope_dim, rope_dim, freqs.data(), b * r, /*inverse=*/false);
  if (kind == CompressorKind::kMain) {
    fake_quant_fp8(std::span<float>(out.data(), static_cast<size_t>(dc - rope_dim)), 64);
  } else {
    ref::hadamard_rotate(out.data(), dc);
    fake_quant_fp4(std::span<float>(out), 32);
  }
  st->rows.append(out);
  st->n_entries = b + 1;
}

}  // namespace

void compressor_project_jobs(const CompressorWeights& w, const float* x, int64_t n, CompressorProjection* p,
                             std::vector<LinearJob>* jobs) {
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  p->kv.grow(n * width);
  p->score.grow(n * width);
  jobs->push_back({&w.wkv, x, p->kv.data()});
  jobs->push_back({&w.wgate, x, p->score.data()});
}

void compressor_project(const Execution& ex, const CompressorWeights& w, const float* x, int64_t n,
                        CompressorProjection* p) {
  thread_local std::vector<LinearJob> jobs;
  jobs.clear();
  compressor_project_jobs(w, x, n, p, &jobs);
  linear_jobs(ex, jobs, n);
}

void compressor_consume(const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                        const std::vector<float>& rope_freqs, CompressorState* st, const CompressorProjection& p,
                        int64_t row0, int64_t start, int64_t n) {
  const int64_t r = w.ratio;
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  thread_local std::vector<float> row;  // [kv | score + ape], grow-only
  row.resize(static_cast<size_t>(2 * width));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = start + i;
    const int64_t slot = pos % r;
    DSV4_DCHECK(st->partial.size() == pos, "compressor_consume: positions must continue the state");
    std::copy_n(p.kv.data() + (row0 + i) * width, width, row.data());
    std::copy_n(p.score.data() + (row0 + i) * width, width, row.data() + width);
    for (int64_t c = 0; c < width; ++c) row[static_cast<size_t>(width + c)] += w.ape[static_cast<size_t>(slot * width + c)];
    st->partial.append(row);
    if ((pos + 1) % r == 0) emit_entry(w, kind, rope_dim, norm_eps, rope_freqs, st, pos / r);
  }
}

void compressor_feed(const Execution& ex, const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                     const std::vector<float>& rope_freqs, CompressorState* st, const float* x, int64_t start,
                     int64_t n) {
  // Both projections for all n tokens at once (fp32 GEMMs on fp32 input), then streamed into the slots.
  CompressorProjection p;
  compressor_project(ex, w, x, n, &p);
  compressor_consume(w, kind, rope_dim, norm_eps, rope_freqs, st, p, 0, start, n);
}

}  // namespace dsv4::v4
