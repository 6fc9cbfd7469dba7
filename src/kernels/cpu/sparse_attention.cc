// kernels: sparse attention driver — the reference's block-of-64 online softmax per head, with the dots
// and P·V handed to the per-ISA loops of attention_tiles.h. Heads are split across the pool (each head's
// result is computed by one thread with the same operations, so any thread count gives the same bits).
#include "kernels/cpu/sparse_attention.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_tiles.h"

namespace dsv4::kernels {
namespace {

constexpr int64_t kBlock = 64;  // the reference's online-softmax block (golden README item 12)
constexpr int64_t kLineFloats = 64 / sizeof(float);

void heads_range(const SparseAttentionShape& p, const float* q, const float* const* rows, int64_t n_idx,
                 const float* sink, float* out, int64_t h0, int64_t h1, SparseAttentionScratch::Slot& s,
                 const detail::AttnTiles& tiles) {
  const int64_t D = p.head_dim, nh = h1 - h0;
  s.visible.resize(kBlock);
  s.scores.resize(static_cast<size_t>(nh * kBlock));
  s.probs.resize(static_cast<size_t>(nh * kBlock));
  s.block.resize(static_cast<size_t>(nh * D));
  s.acc.assign(static_cast<size_t>(nh * D), 0.0f);
  s.m.assign(static_cast<size_t>(nh), -INFINITY);
  s.l.assign(static_cast<size_t>(nh), 0.0f);
  s.bmax.resize(static_cast<size_t>(nh));
  s.rescale.resize(static_cast<size_t>(nh));
  s.psum.resize(static_cast<size_t>(nh));
  for (int64_t b0 = 0; b0 < n_idx; b0 += kBlock) {
    const int64_t nb = std::min(kBlock, n_idx - b0);
    int64_t nv = 0;
    for (int64_t j = 0; j < nb; ++j)
      if (rows[b0 + j]) s.visible[static_cast<size_t>(nv++)] = rows[b0 + j];
    // A fully masked block leaves m, l and acc unchanged in the reference (rescale exp(0) = 1, adds +0).
    if (nv == 0) continue;
    // The next block's rows, fetched towards L2 while this one computes: selected rows lie anywhere in a
    // long context's KV (one DRAM miss per line otherwise, each row's first lines before the hardware
    // prefetcher follows it).
    const int64_t next_end = std::min(n_idx, b0 + 2 * kBlock);
    for (int64_t j = b0 + kBlock; j < next_end; ++j)
      if (const float* r = rows[j])
        for (int64_t i = 0; i < D; i += kLineFloats) __builtin_prefetch(r + i, 0, 2);
    tiles.scores(q + h0 * D, nh, D, s.visible.data(), nv, p.scale, s.scores.data());
    // Per head: the block max against the running max, fp32 exp of every score, the sum in double and the
    // bf16 probabilities — the reference's operations in its order.
    tiles.softmax(s.scores.data(), nh, nv, s.m.data(), s.bmax.data(), s.rescale.data(), s.psum.data(), s.probs.data());
    tiles.pv(s.probs.data(), nh, s.visible.data(), nv, D, s.block.data());
    for (int64_t h = 0; h < nh; ++h) {
      const float bmax = s.bmax[static_cast<size_t>(h)];
      if (bmax == -INFINITY) continue;
      const float rescale = s.rescale[static_cast<size_t>(h)];
      float& l = s.l[static_cast<size_t>(h)];
      l = l * rescale + static_cast<float>(s.psum[static_cast<size_t>(h)]);
      tiles.rescale(s.acc.data() + h * D, s.block.data() + h * D, D, rescale);
      s.m[static_cast<size_t>(h)] = bmax;
    }
  }
  for (int64_t h = 0; h < nh; ++h) {
    const float l = s.l[static_cast<size_t>(h)] + std::exp(sink[h0 + h] - s.m[static_cast<size_t>(h)]);
    tiles.output(s.acc.data() + h * D, D, l,
                 out + (h0 + h) * D);  // bf16(acc / l) in lanes: ~15% of the call as a scalar loop
  }
}

}  // namespace

void sparse_attention(const SparseAttentionShape& shape, const float* q, const float* const* rows, int64_t n_idx,
                      const float* sink, float* out, SparseAttentionScratch& scratch, const AttentionOptions& opt) {
  DSV4_CHECK(shape.n_heads > 0 && shape.head_dim > 0 && n_idx >= 0, "sparse_attention: bad shape");
  const Isa isa = resolve_isa(opt.isa);
  const detail::AttnTiles tiles = detail::attn_tiles_for(isa);
  // Four heads per grain keeps the vector loops' 4-head groups whole.
  constexpr int64_t kGrain = 4;
  // Small calls (under ~256K multiply-adds of q·k) stay on the calling thread: a pool wake-up would cost
  // more than the work.
  const bool small = shape.n_heads * n_idx * shape.head_dim < (int64_t{1} << 18);
  const int n_slots = opt.pool && !small ? opt.pool->n_slots(shape.n_heads, kGrain) : 1;
  if (static_cast<int>(scratch.slots.size()) < n_slots) scratch.slots.resize(static_cast<size_t>(n_slots));
  if (n_slots <= 1) {
    heads_range(shape, q, rows, n_idx, sink, out, 0, shape.n_heads, scratch.slots[0], tiles);
    return;
  }
  opt.pool->parallel_for(shape.n_heads, kGrain, [&](int64_t h0, int64_t h1, int slot) {
    heads_range(shape, q, rows, n_idx, sink, out, h0, h1, scratch.slots[static_cast<size_t>(slot)], tiles);
  });
}

}  // namespace dsv4::kernels
