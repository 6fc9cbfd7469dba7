// kernels: the MoE layer — token grouping, one gate/up/SwiGLU dispatch over all experts' rows, one down
// dispatch over output rows with the expert-ordered fp32 combine.
#include "kernels/cpu/moe_layer.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/quant_tiles.h"
#include "kernels/cpu/row_pairs.h"
#include "kernels/cpu/swiglu.h"

namespace dsv4::kernels {
namespace {

using detail::kSwigluRows;
using detail::kTileRows;
using detail::kTileTokens;

template <typename Fn>
void for_range(const MatmulOptions& opt, int64_t n, int64_t grain, Fn&& fn) {
  if (opt.pool != nullptr) {
    opt.pool->parallel_for(n, grain, fn);
  } else if (n > 0) {
    fn(0, n, 0);
  }
}

#if defined(__x86_64__)
// The grouped assignments of one call (moe_layer's counting sort).
struct Groups {
  int64_t n_tokens, d, n_inter, shared_inter, n_routed_slots, n_slots;
  int32_t n_assign;
  int64_t max_assign;  // n_tokens · top_k: the bound buffers grow to
  const int32_t* assign_token;
  const float* assign_weight;
  const std::vector<int32_t>& row_off;
};

// Rows of one AMX call are taken this many at a time, so per-thread result buffers stay [tokens, 64].
constexpr int64_t kAmxRows = 64;

// The shared expert on AMX: moe_layer_amx's shared slot, and the vector path's when the routed experts are
// below their AMX threshold and the shared one at or above its own. One set of calls and epilogues for
// both, so its part of every row equals fp8_gemm's on AMX for that token alone on either path.
struct SharedAmx {
  uint32_t* xpack = nullptr;  // xq [n_tokens, d] packed in the FP8 order
  uint32_t* hpack = nullptr;  // the shared h rows [n_tokens, shared_inter], packed after their quantization
  uint16_t* apacks = nullptr;
  float* outs = nullptr;
  int64_t apack_elems = 0, out_floats = 0;
};

SharedAmx shared_amx_setup(const MoeLayerWeights& w, const float* xq, int64_t n_tokens, int64_t d, int64_t n_stage1,
                           MoeLayerScratch& s, const MatmulOptions& opt) {
  const int64_t shared_inter = w.shared->w1.n_rows;
  SharedAmx sa;
  sa.xpack = s.amx_x.grow(detail::amx_packed_x_words(n_tokens, d));
  sa.hpack = s.amx_h.grow(detail::amx_packed_x_words(n_tokens, shared_inter));
  const bool exact = detail::amx_pack_x(detail::AmxKOrder::kFp8, xq, d, n_tokens, d, sa.xpack);
  DSV4_DCHECK(exact, "moe_layer: fake-quantized activations are exact in bf16");
  if (!exact) detail::note_bf16_refusal();
  const int pool_slots = opt.pool != nullptr ? std::max(opt.pool->n_slots(n_stage1, 16), opt.pool->n_slots(d, 16)) : 1;
  sa.apack_elems = detail::amx_apack_elems(std::max(d, shared_inter));
  sa.out_floats = 2 * n_tokens * kAmxRows;
  sa.apacks = detail::align64(s.amx_apack.grow(pool_slots * sa.apack_elems + 32));
  sa.outs = s.amx_out.grow(pool_slots * sa.out_floats);
  return sa;
}

// Stage 1, shared rows [i0, i1) (multiples of 16 from i0): g, u on AMX, then the SwiGLU into h [n_tokens, shared_inter].
void shared_amx_stage1(const MoeLayerWeights& w, const SharedAmx& sa, const float* xq, int64_t n_tokens, int64_t d,
                       int64_t i0, int64_t i1, float* h, int pslot) {
  const int64_t rows = w.shared->w1.n_rows;
  float* gb = sa.outs + pslot * sa.out_floats;  // [n_tokens, kAmxRows]
  float* ub = gb + n_tokens * kAmxRows;
  uint16_t* apack = sa.apacks + pslot * sa.apack_elems;
  for (int64_t i = i0; i < i1; i += kAmxRows) {
    const int64_t ie = std::min(i1, i + kAmxRows);
    detail::fp8_gemm_amx_rows({w.shared->w1.codes, w.shared->w1.scales, rows, d},
                              {sa.xpack, xq, d, n_tokens, i, ie, gb, kAmxRows, false, apack});
    detail::fp8_gemm_amx_rows({w.shared->w3.codes, w.shared->w3.scales, rows, d},
                              {sa.xpack, xq, d, n_tokens, i, ie, ub, kAmxRows, false, apack});
    for (int64_t j = 0; j < n_tokens; ++j)
      for (int64_t n = i; n < ie; ++n)
        h[j * rows + n] = swiglu_clamped(round_bf16(gb[j * kAmxRows + (n - i)]), round_bf16(ub[j * kAmxRows + (n - i)]),
                                         1.0f, w.swiglu_limit);
  }
}

void shared_amx_pack_h(const SharedAmx& sa, const float* hs, int64_t n_tokens, int64_t shared_inter) {
  const bool exact = detail::amx_pack_x(detail::AmxKOrder::kFp8, hs, shared_inter, n_tokens, shared_inter, sa.hpack);
  DSV4_DCHECK(exact, "moe_layer: fake-quantized activations are exact in bf16");
  if (!exact) detail::note_bf16_refusal();
}

// Stage 2, output rows [n0, n1): y[t, n] += bf16(w2 · h_t) (the shared expert is the last slot).
void shared_amx_stage2(const MoeLayerWeights& w, const SharedAmx& sa, const float* hs, int64_t n_tokens, int64_t d,
                       int64_t n0, int64_t n1, float* y, int pslot) {
  const int64_t shared_inter = w.shared->w1.n_rows;
  float* o = sa.outs + pslot * sa.out_floats;  // [n_tokens, kAmxRows]
  uint16_t* apack = sa.apacks + pslot * sa.apack_elems;
  for (int64_t nb = n0; nb < n1; nb += kAmxRows) {
    const int64_t ne = std::min(n1, nb + kAmxRows);
    detail::fp8_gemm_amx_rows({w.shared->w2.codes, w.shared->w2.scales, d, shared_inter},
                              {sa.hpack, hs, shared_inter, n_tokens, nb, ne, o, kAmxRows, true, apack});
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t n = nb; n < ne; ++n) y[t * d + n] += o[t * kAmxRows + (n - nb)];
  }
}

// The AMX path: every slot's activations packed once to bf16 tiles, then the same two dispatches as the
// vector path with the AMX GEMM on each slot's tokens. Each (row, token) result equals fp4_gemm /
// fp8_gemm's on that token alone (the AMX GEMM is batch-invariant), so the layer equals the per-token
// composition moe_expert_fp4/fp8 run on AMX.
void moe_layer_amx(const MoeLayerWeights& w, const float* xq, const Groups& g, float* y, MoeLayerScratch& s,
                   const MatmulOptions& opt) {
  const int64_t d = g.d, n_inter = g.n_inter, shared_inter = g.shared_inter;
  const int64_t max_assign = g.max_assign;
  auto slot_tokens = [&](int64_t slot, int64_t* a0, int64_t* na) {
    const bool routed = slot < g.n_routed_slots;
    *a0 = routed ? s.slot_begin[static_cast<size_t>(slot)] : 0;
    *na = routed ? s.slot_begin[static_cast<size_t>(slot + 1)] - *a0 : g.n_tokens;
  };
  // Packs each slot's activations (routed: rows a0.. of `routed` [., ld_r]; shared: `shared` [n_tokens, ld_s]).
  auto pack_slots = [&](ScratchVec<uint32_t>& buf, std::vector<int64_t>& off, const float* routed_x, int64_t ld_r,
                        int64_t k_r, const float* shared_x, int64_t ld_s, int64_t k_s) {
    off.reserve(static_cast<size_t>(w.n_experts + 2));  // at its bound from the first call
    off.assign(static_cast<size_t>(g.n_slots + 1), 0);
    for (int64_t slot = 0; slot < g.n_slots; ++slot) {
      int64_t a0, na;
      slot_tokens(slot, &a0, &na);
      const int64_t k = slot < g.n_routed_slots ? k_r : k_s;
      off[static_cast<size_t>(slot + 1)] = off[static_cast<size_t>(slot)] + detail::amx_packed_x_words(na, k);
    }
    // The bound over any grouping of this batch (a slot of na tokens packs ≤ (na + 15)·64 words per 128 K,
    // and only slots of more than 16 tokens round up): a later step of the same size never allocates.
    const int64_t bound = 2 * (max_assign + g.n_tokens) * 64 * ((std::max(k_r, k_s) + 127) / 128);
    uint32_t* base = buf.grow(std::max(bound, off.back()));
    for_range(opt, g.n_slots, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t slot = b; slot < e; ++slot) {
        int64_t a0, na;
        slot_tokens(slot, &a0, &na);
        const bool routed = slot < g.n_routed_slots;
        const bool exact = detail::amx_pack_x(routed ? detail::AmxKOrder::kFp4 : detail::AmxKOrder::kFp8,
                                              routed ? routed_x + a0 * ld_r : shared_x, routed ? ld_r : ld_s, na,
                                              routed ? k_r : k_s, base + off[static_cast<size_t>(slot)]);
        DSV4_DCHECK(exact, "moe_layer: fake-quantized activations are exact in bf16");
        if (!exact) detail::note_bf16_refusal();
      }
    });
  };

  // Stage 1 inputs: the gathered xq rows per assignment [n_assign, d] (floats too: FP4's exact fallback).
  float* xg = s.xperm.grow(max_assign * d);
  for (int32_t a = 0; a < g.n_assign; ++a)
    std::memcpy(xg + static_cast<int64_t>(a) * d, xq + static_cast<int64_t>(g.assign_token[a]) * d, sizeof(float) * static_cast<size_t>(d));
  pack_slots(s.amx_x, s.amx_x_off, xg, d, d, xq, d, d);
  const int64_t shared_h_off = static_cast<int64_t>(g.n_assign) * n_inter;
  float* h = s.h.grow(max_assign * n_inter + g.n_tokens * shared_inter);

  // Per pool slot (the parallel_for's third argument): a decode buffer and the GEMM results, sized by
  // bounds from the caller, so a warm step allocates nothing whichever thread runs which chunk.
  const int64_t n_stage1 = g.row_off[static_cast<size_t>(g.n_slots)];
  const int pool_slots = opt.pool != nullptr ? std::max(opt.pool->n_slots(n_stage1, 16), opt.pool->n_slots(d, 16)) : 1;
  const int64_t apack_elems = detail::amx_apack_elems(std::max({d, n_inter, shared_inter}));
  const int64_t out_floats = 2 * g.n_tokens * kAmxRows;  // a slot has at most n_tokens tokens
  uint16_t* apacks = detail::align64(s.amx_apack.grow(pool_slots * apack_elems + 32));
  float* outs = s.amx_out.grow(pool_slots * out_floats);
  // The shared slot runs through the helpers the vector path uses, on this path's packed buffers (hpack
  // once h is packed: amx_h may move when it grows).
  SharedAmx sa;
  if (w.shared != nullptr) {
    sa.xpack = s.amx_x.data() + s.amx_x_off[static_cast<size_t>(g.n_routed_slots)];
    sa.apacks = apacks;
    sa.outs = outs;
    sa.apack_elems = apack_elems;
    sa.out_floats = out_floats;
  }

  // Stage 1: gate/up GEMMs + SwiGLU for every (slot, row block).
  for_range(opt, n_stage1, 16, [&](int64_t r0, int64_t r1, int pslot) {
    int64_t slot = std::upper_bound(g.row_off.begin(), g.row_off.end(), static_cast<int32_t>(r0)) - g.row_off.begin() - 1;
    for (int64_t r = r0; r < r1;) {
      while (r >= g.row_off[static_cast<size_t>(slot + 1)]) ++slot;
      const int64_t base = g.row_off[static_cast<size_t>(slot)];
      const int64_t i0 = r - base, i1 = std::min<int64_t>(r1, g.row_off[static_cast<size_t>(slot + 1)]) - base;
      r = base + i1;
      if (slot == g.n_routed_slots) {
        shared_amx_stage1(w, sa, xq, g.n_tokens, d, i0, i1, h + shared_h_off, pslot);
        continue;
      }
      const int64_t a0 = s.slot_begin[static_cast<size_t>(slot)], na = s.slot_begin[static_cast<size_t>(slot + 1)] - a0;
      float* gb = outs + pslot * out_floats;  // [na, kAmxRows]
      float* ub = gb + na * kAmxRows;
      const uint32_t* xp = s.amx_x.data() + s.amx_x_off[static_cast<size_t>(slot)];
      uint16_t* apack = apacks + pslot * apack_elems;
      const Fp4Expert& e = w.experts[s.slot_expert[static_cast<size_t>(slot)]];
      for (int64_t i = i0; i < i1; i += kAmxRows) {
        const int64_t ie = std::min(i1, i + kAmxRows);
        detail::fp4_gemm_amx_rows({e.w1.packed, e.w1.scales, n_inter, d}, {xp, xg + a0 * d, d, na, i, ie, gb, kAmxRows, false, apack});
        detail::fp4_gemm_amx_rows({e.w3.packed, e.w3.scales, n_inter, d}, {xp, xg + a0 * d, d, na, i, ie, ub, kAmxRows, false, apack});
        for (int64_t j = 0; j < na; ++j) {
          float* hr = h + (a0 + j) * n_inter;
          for (int64_t n = i; n < ie; ++n)
            hr[n] = swiglu_clamped(round_bf16(gb[j * kAmxRows + (n - i)]), round_bf16(ub[j * kAmxRows + (n - i)]),
                                   g.assign_weight[a0 + j], w.swiglu_limit);
        }
      }
    }
  });

  // w2 inputs: bf16(h), then its FP8 1×128 quantization, packed per slot.
  const int64_t n_h_rows = g.n_assign + (w.shared ? g.n_tokens : 0);
  for_range(opt, n_h_rows, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const bool routed = r < g.n_assign;
      const int64_t len = routed ? n_inter : shared_inter;
      float* row = routed ? h + r * n_inter : h + shared_h_off + (r - g.n_assign) * shared_inter;
      act_quant_fp8(row, row, len, 128, /*bf16_first=*/true, opt.isa);
    }
  });
  pack_slots(s.amx_h, s.amx_h_off, h, n_inter, n_inter, h + shared_h_off, shared_inter, shared_inter);
  if (w.shared != nullptr) sa.hpack = s.amx_h.data() + s.amx_h_off[static_cast<size_t>(g.n_routed_slots)];

  // Stage 2: output rows split across threads; each (token, row) sums its experts in slot order. Slots
  // outermost: a thread streams each expert's slice of w2 rows in one pass (the decoder's prefetch of the
  // next 16 rows stays in the same matrix), rather than hopping to the next expert every kAmxRows rows.
  for_range(opt, d, 16, [&](int64_t n0, int64_t n1, int pslot) {
    float* o = outs + pslot * out_floats;  // [na, kAmxRows]
    uint16_t* apack = apacks + pslot * apack_elems;
    for (int64_t t = 0; t < g.n_tokens; ++t) std::fill(y + t * d + n0, y + t * d + n1, 0.0f);
    for (int64_t slot = 0; slot < g.n_routed_slots; ++slot) {
      const int64_t a0 = s.slot_begin[static_cast<size_t>(slot)], na = s.slot_begin[static_cast<size_t>(slot + 1)] - a0;
      const uint32_t* hp = s.amx_h.data() + s.amx_h_off[static_cast<size_t>(slot)];
      const Fp4Expert& e = w.experts[s.slot_expert[static_cast<size_t>(slot)]];
      for (int64_t nb = n0; nb < n1; nb += kAmxRows) {
        const int64_t ne = std::min(n1, nb + kAmxRows);
        detail::fp4_gemm_amx_rows({e.w2.packed, e.w2.scales, d, n_inter},
                                  {hp, h + a0 * n_inter, n_inter, na, nb, ne, o, kAmxRows, true, apack});
        for (int64_t j = 0; j < na; ++j) {
          float* yr = y + static_cast<int64_t>(g.assign_token[a0 + j]) * d;
          for (int64_t n = nb; n < ne; ++n) yr[n] += o[j * kAmxRows + (n - nb)];  // each expert outputs bf16
        }
      }
    }
    if (w.shared != nullptr) shared_amx_stage2(w, sa, h + shared_h_off, g.n_tokens, d, n0, n1, y, pslot);
    for (int64_t t = 0; t < g.n_tokens; ++t)
      for (int64_t n = n0; n < n1; ++n) y[t * d + n] = round_bf16(y[t * d + n]);
  });
}

#endif

}  // namespace

void moe_layer(const MoeLayerWeights& w, const float* x, int64_t n_tokens, const int32_t* expert_ids,
               const float* route_weights, int64_t top_k, float* y, MoeLayerScratch& s, const MatmulOptions& opt) {
  DSV4_CHECK(w.n_experts > 0 && w.experts != nullptr, "moe_layer: no experts");
  const int64_t d = w.experts[0].w1.n_cols, n_inter = w.experts[0].w1.n_rows;
  const int64_t shared_inter = w.shared ? w.shared->w1.n_rows : 0;
  DSV4_CHECK(d % 128 == 0 && n_inter % 128 == 0 && shared_inter % 128 == 0, "moe_layer: dims must be multiples of 128");
  if (n_tokens <= 0) return;
  const Isa isa = resolve_isa(opt.isa);
  // The shared expert's FP8 stages: the tile and the activations it reads, prepared once per stage (fp8_operand).
  detail::Fp8Operand shared1{}, shared2{};

  // The FP8 activation quantization of the layer input, shared by every expert's w1/w3 (and the shared one).
  float* xq = s.xq.grow(n_tokens * d);  // [n_tokens, d]
  act_quant_fp8(x, xq, n_tokens * d, 128, /*bf16_first=*/false, isa);  // d % 128 == 0: rows are whole blocks

  // Group (token, weight) assignments by expert with a counting sort: slots in ascending expert id, tokens
  // ascending within a slot. The shared expert is the last slot and takes every token.
  // Slot-indexed buffers at their largest (every expert active + the shared one) from the first call, so
  // a later step with more distinct experts than before does not allocate.
  for (std::vector<int32_t>* v : {&s.slot_expert, &s.slot_begin, &s.slot_fill, &s.row_offset})
    v->reserve(static_cast<size_t>(w.n_experts + 2));
  std::vector<int32_t>& count = s.row_offset;  // reused: per-expert counts, then row offsets
  count.assign(static_cast<size_t>(w.n_experts + 1), 0);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t e = expert_ids[t * top_k + j];
      DSV4_CHECK(e >= 0 && e < w.n_experts, "moe_layer: expert id out of range");
      bool dup = false;
      for (int64_t i = 0; i < j; ++i) dup |= expert_ids[t * top_k + i] == e;
      if (!dup) ++count[static_cast<size_t>(e)];
    }
  s.slot_expert.clear();
  s.slot_begin.clear();
  int32_t n_assign = 0;
  for (int64_t e = 0; e < w.n_experts; ++e) {
    if (count[static_cast<size_t>(e)] == 0) continue;
    s.slot_expert.push_back(static_cast<int32_t>(e));
    s.slot_begin.push_back(n_assign);
    n_assign += count[static_cast<size_t>(e)];
  }
  const int64_t n_routed_slots = static_cast<int64_t>(s.slot_expert.size());
  s.slot_begin.push_back(n_assign);
  // Buffers sized by assignments grow to the bound n_tokens·top_k, not this step's count: a later step
  // of the same batch size never allocates.
  const int64_t max_assign = n_tokens * top_k;
  int32_t* assign_token = s.assign_token.grow(max_assign);
  float* assign_weight = s.assign_weight.grow(max_assign);
  {
    std::vector<int32_t>& fill = s.slot_fill;
    fill.assign(s.slot_begin.begin(), s.slot_begin.end() - 1);
    std::vector<int32_t>& slot_of = s.slot_of;
    slot_of.assign(static_cast<size_t>(w.n_experts), -1);
    for (int64_t i = 0; i < n_routed_slots; ++i) slot_of[static_cast<size_t>(s.slot_expert[static_cast<size_t>(i)])] = static_cast<int32_t>(i);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t j = 0; j < top_k; ++j) {
        const int32_t e = expert_ids[t * top_k + j];
        bool dup = false;
        for (int64_t i = 0; i < j; ++i) dup |= expert_ids[t * top_k + i] == e;
        if (dup) continue;
        const int32_t pos = fill[static_cast<size_t>(slot_of[static_cast<size_t>(e)])]++;
        assign_token[pos] = static_cast<int32_t>(t);
        assign_weight[pos] = route_weights[t * top_k + j];
      }
  }
  // Stage-1 rows: each routed slot owns n_inter rows, then the shared expert shared_inter rows.
  const int64_t n_slots = n_routed_slots + (w.shared ? 1 : 0);
  std::vector<int32_t>& row_off = s.row_offset;
  row_off.assign(static_cast<size_t>(n_slots + 1), 0);
  for (int64_t i = 0; i < n_slots; ++i)
    row_off[static_cast<size_t>(i + 1)] = row_off[static_cast<size_t>(i)] + static_cast<int32_t>(i < n_routed_slots ? n_inter : shared_inter);

  const bool routed_amx = isa == Isa::kAmx && n_tokens >= opt.amx_min_tokens;
  const bool shared_amx = w.shared != nullptr && isa == Isa::kAmx && (routed_amx || n_tokens >= w.shared_amx_min_tokens);
#if defined(__x86_64__)
  if (routed_amx) {
    moe_layer_amx(w, xq, Groups{n_tokens, d, n_inter, shared_inter, n_routed_slots, n_slots, n_assign, max_assign,
                                assign_token, assign_weight, row_off},
                  y, s, opt);
    return;
  }
#endif
  // Both FP4 stages read fake-quantized FP8 activations (xq, then h): power-of-two scales times E4M3
  // values, exact in bf16. Each stage picks its tile from its inputs' magnitudes as well (fp4_kernel_for_x:
  // the VDPBF16PS tile needs no nonzero below 2^-100).
  const detail::Fp4Kernel fp4 = detail::fp4_kernel_for_x(isa, xq, n_tokens * d);
  // Gathered activations per assignment ([n_assign, ldx1], in the FP4 tile's layout).
  const int64_t ldx1 = detail::fp4_x_stride(fp4.layout, d);
  float* xg = s.xperm.grow(max_assign * ldx1);
  for (int32_t a = 0; a < n_assign; ++a)
    detail::fp4_prepare_x(fp4.layout, xq + static_cast<int64_t>(assign_token[a]) * d, 1, d,
                          xg + static_cast<int64_t>(a) * ldx1);
  // h: routed [n_assign, n_inter] then shared [n_tokens, shared_inter].
  const int64_t shared_h_off = static_cast<int64_t>(n_assign) * n_inter;
  float* h = s.h.grow(max_assign * n_inter + n_tokens * shared_inter);
#if defined(__x86_64__)
  // The shared expert on AMX beside routed experts on the vector tiles: its activations packed to bf16
  // tiles, a decode buffer and GEMM results per pool slot (bounds from the first call: no allocation in a
  // warm step).
  SharedAmx sa;
  if (shared_amx) sa = shared_amx_setup(w, xq, n_tokens, d, row_off[static_cast<size_t>(n_slots)], s, opt);
#else
  (void)shared_amx;
#endif
  if (w.shared != nullptr && !shared_amx)
    shared1 = detail::fp8_operand(isa, xq, n_tokens, d, s.shared_x.grow(detail::fp8_scratch_floats(isa, n_tokens, d)));

  // Stage 1: gate/up tiles + SwiGLU for every (slot, row), one dispatch. The SwiGLU runs along rows, on
  // kSwigluRows tiles' results at a time (swiglu.h: the vector form of swiglu_clamped, same bits).
  const detail::SwigluFn swiglu = detail::swiglu_fn(isa);
  for_range(opt, row_off[static_cast<size_t>(n_slots)], 16, [&](int64_t r0, int64_t r1, int pslot) {
    detail::GateUpBlock gu;
    int64_t slot = std::upper_bound(row_off.begin(), row_off.end(), static_cast<int32_t>(r0)) - row_off.begin() - 1;
    for (int64_t r = r0; r < r1;) {
      while (r >= row_off[static_cast<size_t>(slot + 1)]) ++slot;
      const int64_t i0 = r - row_off[static_cast<size_t>(slot)];
      const int64_t i1 = std::min<int64_t>(r1, row_off[static_cast<size_t>(slot + 1)]) - row_off[static_cast<size_t>(slot)];
#if defined(__x86_64__)
      if (slot == n_routed_slots && shared_amx) {
        shared_amx_stage1(w, sa, xq, n_tokens, d, i0, i1, h + shared_h_off, pslot);
        r = row_off[static_cast<size_t>(slot)] + i1;
        continue;
      }
#endif
      if (slot < n_routed_slots) {
        const Fp4Expert& e = w.experts[s.slot_expert[static_cast<size_t>(slot)]];
        const int64_t a0 = s.slot_begin[static_cast<size_t>(slot)], na = s.slot_begin[static_cast<size_t>(slot + 1)] - a0;
        detail::Fp4Tile t;
        t.k = d;
        t.ldx = ldx1;
        t.prefetch = d / 2;  // row i + 1 of w1 and w3
        t.n_rows = 2;
        for (int64_t t0 = 0; t0 < na; t0 += kTileTokens) {
          t.n_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, na - t0));
          t.x = xg + (a0 + t0) * ldx1;
          for (int64_t ib = i0; ib < i1; ib += kSwigluRows) {
            const int nb = static_cast<int>(std::min<int64_t>(kSwigluRows, i1 - ib));
            for (int b = 0; b < nb; ++b) {
              const int64_t i = ib + b;
              t.w[0] = e.w1.packed + i * (d / 2);
              t.s[0] = e.w1.scales + i * (d / 32);
              t.w[1] = e.w3.packed + i * (d / 2);
              t.s[1] = e.w3.scales + i * (d / 32);
              fp4.tile(t);
              gu.put(t.sums, t.n_tokens, b);
            }
            for (int j = 0; j < t.n_tokens; ++j)
              swiglu(gu.g[j], gu.u[j], nb, assign_weight[a0 + t0 + j], w.swiglu_limit, h + (a0 + t0 + j) * n_inter + ib);
          }
        }
      } else {
        const Fp8Expert& e = *w.shared;
        const int64_t sc = (d + 127) / 128;
        detail::Fp8Tile t;
        t.k = d;
        t.ldx = shared1.ldx;
        t.prefetch = d;
        t.n_rows = 2;
        for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
          t.n_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
          t.x = shared1.x + t0 * shared1.ldx;
          for (int64_t ib = i0; ib < i1; ib += kSwigluRows) {
            const int nb = static_cast<int>(std::min<int64_t>(kSwigluRows, i1 - ib));
            for (int b = 0; b < nb; ++b) {
              const int64_t i = ib + b;
              t.w[0] = e.w1.codes + i * d;
              t.s[0] = e.w1.scales + (i / 128) * sc;
              t.w[1] = e.w3.codes + i * d;
              t.s[1] = e.w3.scales + (i / 128) * sc;
              shared1.tile(t);
              gu.put(t.sums, t.n_tokens, b);
            }
            for (int j = 0; j < t.n_tokens; ++j)
              swiglu(gu.g[j], gu.u[j], nb, 1.0f, w.swiglu_limit, h + shared_h_off + (t0 + j) * shared_inter + ib);
          }
        }
      }
      r = row_off[static_cast<size_t>(slot)] + i1;
    }
  });

  // w2 inputs: bf16(h), then its FP8 1×128 quantization; then w2's tile is picked from the routed rows
  // (as stage 1's from xq) and they are put in its layout.
  const int64_t n_h_rows = n_assign + (w.shared ? n_tokens : 0);
  const float* hs = h + shared_h_off;  // [n_tokens, shared_inter]
  for_range(opt, n_h_rows, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const bool routed = r < n_assign;
      const int64_t len = routed ? n_inter : shared_inter;
      float* row = routed ? h + r * n_inter : h + shared_h_off + (r - n_assign) * shared_inter;
      act_quant_fp8(row, row, len, 128, /*bf16_first=*/true, opt.isa);
    }
  });
  const detail::Fp4Kernel fp4_w2 = detail::fp4_kernel_for_x(isa, h, static_cast<int64_t>(n_assign) * n_inter);
  const bool prepare = fp4_w2.layout != detail::Fp4XLayout::kNatural;
  const int64_t ldx2 = detail::fp4_x_stride(fp4_w2.layout, n_inter);
  float* hp = s.hperm.grow(max_assign * ldx2);
  if (prepare)
    for_range(opt, n_assign, 1, [&](int64_t b, int64_t e, int) {
      detail::fp4_prepare_x(fp4_w2.layout, h + b * n_inter, e - b, n_inter, hp + b * ldx2);
    });
  const float* h_routed = prepare ? hp : h;  // [n_assign, ldx2]
#if defined(__x86_64__)
  if (shared_amx) shared_amx_pack_h(sa, hs, n_tokens, shared_inter);
#endif
  if (w.shared != nullptr && !shared_amx)
    shared2 = detail::fp8_operand(isa, hs, n_tokens, shared_inter,
                                  s.shared_h.grow(detail::fp8_scratch_floats(isa, n_tokens, shared_inter)));

  // Stage 2: output rows split across threads; each (token, row) sums its experts in slot order. A tile
  // reads rows n and n + step, half the chunk apart (row_pairs.h): w2 rows are 1-2 KB, so adjacent rows
  // would share a page and the L2 streamer would follow only one of the tile's two streams. The tiles run
  // in interleaved_tile order (q, h + q, q + 1, ...), so a pass follows four streams: more lines in flight
  // on these short rows (dsv4_bench fp4_tile_stream/{two_halves,four_streams}/m=1/k=2048; moe_layer/avx512
  // m=1 CPU time 2-5% lower). Which tile runs when changes no result.
  for_range(opt, d, 16, [&](int64_t n0, int64_t n1, int pslot) {
    const int64_t step = detail::far_pair_step(n1 - n0);
    for (int64_t t = 0; t < n_tokens; ++t) std::fill(y + t * d + n0, y + t * d + n1, 0.0f);
    for (int64_t slot = 0; slot < n_slots; ++slot) {
      const bool routed = slot < n_routed_slots;
#if defined(__x86_64__)
      if (!routed && shared_amx) {
        shared_amx_stage2(w, sa, hs, n_tokens, d, n0, n1, y, pslot);
        continue;
      }
#endif
      const int64_t a0 = routed ? s.slot_begin[static_cast<size_t>(slot)] : 0;
      const int64_t na = routed ? s.slot_begin[static_cast<size_t>(slot + 1)] - a0 : n_tokens;
      for (int64_t t0 = 0; t0 < na; t0 += kTileTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, na - t0));
        const int64_t n_tiles = detail::far_pair_tiles(n1 - n0);
        for (int64_t i = 0; i < n_tiles; ++i) {
          const int64_t q = detail::interleaved_tile(n_tiles, i);
          const int64_t n = n0 + q;  // the tile's rows: n, n + step
          const int nr = detail::far_pair_rows(n1 - n0, q);
          float sums[kTileRows][kTileTokens];
          if (routed) {
            const Fp4Expert& e = w.experts[s.slot_expert[static_cast<size_t>(slot)]];
            detail::Fp4Tile t;
            t.k = n_inter;
            t.ldx = ldx2;
            t.prefetch = n_inter / 2;  // the next tile's rows of w2: n + 1, n + step + 1
            t.n_rows = nr;
            t.n_tokens = nt;
            t.x = h_routed + (a0 + t0) * ldx2;
            for (int r = 0; r < nr; ++r) {
              t.w[r] = e.w2.packed + (n + r * step) * (n_inter / 2);
              t.s[r] = e.w2.scales + (n + r * step) * (n_inter / 32);
            }
            fp4_w2.tile(t);
            std::memcpy(sums, t.sums, sizeof(sums));
          } else {
            const Fp8Expert& e = *w.shared;
            detail::Fp8Tile t;
            t.k = shared_inter;
            t.ldx = shared2.ldx;
            t.prefetch = shared_inter;
            t.n_rows = nr;
            t.n_tokens = nt;
            t.x = shared2.x + t0 * shared2.ldx;
            for (int r = 0; r < nr; ++r) {
              t.w[r] = e.w2.codes + (n + r * step) * shared_inter;
              t.s[r] = e.w2.scales + ((n + r * step) / 128) * ((shared_inter + 127) / 128);
            }
            shared2.tile(t);
            std::memcpy(sums, t.sums, sizeof(sums));
          }
          for (int j = 0; j < nt; ++j) {
            const int64_t tok = routed ? assign_token[a0 + t0 + j] : t0 + j;
            for (int r = 0; r < nr; ++r) y[tok * d + n + r * step] += round_bf16(sums[r][j]);  // each expert outputs bf16
          }
        }
      }
    }
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t n = n0; n < n1; ++n) y[t * d + n] = round_bf16(y[t * d + n]);
  });
}

}  // namespace dsv4::kernels
