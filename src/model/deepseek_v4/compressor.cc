// model/deepseek_v4: streaming compressor (spec §2.5, §4).
#include "model/deepseek_v4/compressor.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/formats.h"
#include "core/quant.h"
#include "kernels/cpu/compress_pool.h"
#include "model/deepseek_v4/linear.h"
#include "ops/reference/hadamard.h"
#include "ops/reference/norm.h"
#include "ops/reference/rope.h"

namespace dsv4::v4 {

void compressor_init(const CompressorWeights& w, CompressorState* st) {
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  const auto n = static_cast<size_t>(w.ratio * width);
  st->kv.assign(n, 0.0f);
  st->score.assign(n, -INFINITY);
  if (w.overlap) {
    st->prev_kv.assign(n, 0.0f);  // block −1 does not exist: value 0, score −inf (spec §2.5)
    st->prev_score.assign(n, -INFINITY);
  }
  st->entries.clear();
  st->rows.clear();
  st->n_entries = 0;
}

namespace {

// Pools the completed block b held in the state, then norm → RoPE at b·r → quantization simulation.
void emit_entry(const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                const std::vector<float>& freqs, CompressorState* st, int64_t b) {
  const int64_t r = w.ratio, dc = w.head_dim;
  std::vector<float> out(static_cast<size_t>(dc));
  // The pooling reads the candidates in place (kernels/cpu/compress_pool.h: bit-identical to
  // ref::compress_pool on every ISA, so both backends keep the reference's bits). Overlap: 2r candidates,
  // block b−1 with its first-half channels, block b with its second-half channels; non-overlap: the r tokens.
  const int64_t width = (w.overlap ? 2 : 1) * dc;
  const int64_t n_cand = (w.overlap ? 2 : 1) * r;
  thread_local std::vector<const float*> kv_rows, sc_rows;  // grow-only
  kv_rows.resize(static_cast<size_t>(n_cand));
  sc_rows.resize(static_cast<size_t>(n_cand));
  for (int64_t j = 0; j < r; ++j) {
    if (w.overlap) {
      kv_rows[static_cast<size_t>(j)] = st->prev_kv.data() + j * width;
      sc_rows[static_cast<size_t>(j)] = st->prev_score.data() + j * width;
      kv_rows[static_cast<size_t>(r + j)] = st->kv.data() + j * width + dc;
      sc_rows[static_cast<size_t>(r + j)] = st->score.data() + j * width + dc;
    } else {
      kv_rows[static_cast<size_t>(j)] = st->kv.data() + j * width;
      sc_rows[static_cast<size_t>(j)] = st->score.data() + j * width;
    }
  }
  kernels::compress_pool(kv_rows.data(), sc_rows.data(), n_cand, dc, out.data());
  if (w.overlap) {
    st->prev_kv = st->kv;
    st->prev_score = st->score;
  }
  for (float& v : out) v = round_bf16(v);  // kv.to(bf16) before the norm
  ref::rms_norm(out.data(), 1, dc, w.norm.data(), norm_eps, out.data());
  ref::apply_rope(out.data() + dc - rope_dim, rope_dim, freqs.data(), b * r, /*inverse=*/false);
  if (kind == CompressorKind::kMain) {
    fake_quant_fp8(std::span<float>(out.data(), static_cast<size_t>(dc - rope_dim)), 64);
  } else {
    ref::hadamard_rotate(out.data(), dc);
    fake_quant_fp4(std::span<float>(out), 32);
  }
  if (st->rows.bound()) {
    st->rows.append(out);
  } else {
    st->entries.insert(st->entries.end(), out.begin(), out.end());
  }
  st->n_entries = b + 1;
}

}  // namespace

void compressor_project(const Execution& ex, const CompressorWeights& w, const float* x, int64_t n,
                        CompressorProjection* p) {
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  p->kv.resize(static_cast<size_t>(n * width));
  p->score.resize(static_cast<size_t>(n * width));
  linear(ex, w.wkv, x, n, p->kv.data());
  linear(ex, w.wgate, x, n, p->score.data());
}

void compressor_consume(const CompressorWeights& w, CompressorKind kind, int64_t rope_dim, float norm_eps,
                        const std::vector<float>& rope_freqs, CompressorState* st, const CompressorProjection& p,
                        int64_t row0, int64_t start, int64_t n) {
  const int64_t r = w.ratio;
  const int64_t width = (w.overlap ? 2 : 1) * w.head_dim;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = start + i;
    const int64_t slot = pos % r;
    float* kv = st->kv.data() + slot * width;
    float* sc = st->score.data() + slot * width;
    std::copy_n(p.kv.data() + (row0 + i) * width, width, kv);
    std::copy_n(p.score.data() + (row0 + i) * width, width, sc);
    for (int64_t c = 0; c < width; ++c) sc[c] += w.ape[static_cast<size_t>(slot * width + c)];
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
