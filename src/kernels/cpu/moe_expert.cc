// kernels: the MoE expert, fused (gate+up tile → SwiGLU in the epilogue → w2) and unfused.
#include "kernels/cpu/moe_expert.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/quant_tiles.h"
#include "kernels/cpu/swiglu.h"

namespace dsv4::kernels {
namespace {

using detail::kTileTokens;

// h ← fake_quant_fp8(bf16(h)) row by row: w2's input (bf16 between modules, then its 1×128 quantization).
// The unfused compositions pass Isa::kScalar (core/quant.cc), so fused == unfused also checks the vector quantizer.
void quantize_hidden(float* h, int64_t n_tokens, int64_t n_inter, Isa isa) {
  act_quant_fp8(h, h, n_tokens * n_inter, 128, /*bf16_first=*/true, isa);  // n_inter % 128 == 0: rows are whole blocks
}

// Stage 1 of the fused expert: for each intermediate row i, one tile computes w1 row i and w3 row i for up
// to kTileTokens tokens; the epilogue applies the SwiGLU and writes h[t, i]. `set_rows(tile, i)` points the tile at
// the two rows.
template <typename Tile, typename TileFn, typename SetRows>
void gate_up_swiglu(int64_t n_inter, int64_t d_model, const float* x, int64_t ldx, int64_t n_tokens,
                    const float* route_weight, float limit, float* h, const MatmulOptions& opt, TileFn tile_fn,
                    int64_t row_bytes, SetRows set_rows) {
  // The SwiGLU runs along rows on kSwigluRows tiles' results at a time (swiglu.h: swiglu_clamped's bits).
  const detail::SwigluFn swiglu = detail::swiglu_fn(opt.isa);
  auto body = [&](int64_t i0, int64_t i1, int) {
    Tile t;
    t.k = d_model;
    t.ldx = ldx;
    t.prefetch = row_bytes;  // row i + 1 of w1 and w3
    t.n_rows = 2;
    detail::GateUpBlock gu;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
      t.n_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
      t.x = x + t0 * ldx;
      for (int64_t ib = i0; ib < i1; ib += detail::kSwigluRows) {
        const int nb = static_cast<int>(std::min<int64_t>(detail::kSwigluRows, i1 - ib));
        for (int b = 0; b < nb; ++b) {
          set_rows(t, ib + b);
          tile_fn(t);
          gu.put(t.sums, t.n_tokens, b);
        }
        for (int j = 0; j < t.n_tokens; ++j)
          swiglu(gu.g[j], gu.u[j], nb, route_weight ? route_weight[t0 + j] : 1.0f, limit, h + (t0 + j) * n_inter + ib);
      }
    }
  };
  if (opt.pool != nullptr) {
    opt.pool->parallel_for(n_inter, 16, body);
  } else {
    body(0, n_inter, 0);
  }
}

void unfused_epilogue(const float* g, const float* u, int64_t n_tokens, int64_t n_inter, const float* route_weight,
                      float limit, float* h) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float rw = route_weight ? route_weight[t] : 1.0f;
    for (int64_t i = 0; i < n_inter; ++i)
      h[t * n_inter + i] = swiglu_clamped(g[t * n_inter + i], u[t * n_inter + i], rw, limit);
  }
}

}  // namespace

float swiglu_clamped(float g, float u, float route_weight, float limit) {
  if (limit > 0.0f) {
    u = std::clamp(u, -limit, limit);
    g = std::min(g, limit);  // the gate has no lower clamp
  }
  const float silu = g / (1.0f + std::exp(-g));  // torch's float silu
  return route_weight * (silu * u);
}

int64_t moe_expert_scratch_floats(int64_t n_inter, int64_t d_model, int64_t n_tokens) {
  // Unfused: g, u, h. Fused: h plus the prepared copy of x (FP4 vector tiles: nibble planes pad to 128;
  // the AVX2 FP8 tile: one float past K, rounded up to 8, fp8_avx2_stride: at most these 128 + 8; the
  // AVX2 FP4 tile's fixed-point rows: ~2.1 floats per column).
  const int64_t prepared = std::max((d_model + 127) / 128 * 128 + 8,
                                    detail::fp4_x_stride(detail::Fp4XLayout::kAvx2Fixed, d_model));
  return n_tokens * std::max(3 * n_inter, n_inter + prepared);
}

void moe_expert_fp4(const Fp4Expert& e, const float* x, int64_t n_tokens, const float* route_weight, float limit,
                    float* out, float* scratch, const MatmulOptions& opt) {
  const int64_t n_inter = e.w1.n_rows, d_model = e.w1.n_cols;
  DSV4_CHECK(e.w3.n_rows == n_inter && e.w3.n_cols == d_model && e.w2.n_rows == d_model && e.w2.n_cols == n_inter,
             "moe_expert_fp4: inconsistent expert shapes");
  DSV4_CHECK(d_model % 32 == 0 && n_inter % 128 == 0, "moe_expert_fp4: dims must be multiples of 32 / 128");
  if (n_tokens <= 0) return;
  const Isa isa = resolve_isa(opt.isa);
  // On AMX (from opt.amx_min_tokens tokens) each GEMM already decodes a weight once for all its tokens and
  // the tiles hold no SwiGLU epilogue: the composition (which moe_layer's AMX path reproduces bit for bit).
  if (isa == Isa::kAmx && n_tokens >= opt.amx_min_tokens)
    return moe_expert_fp4_unfused(e, x, n_tokens, route_weight, limit, out, scratch, opt);
  float* h = scratch;  // [n_tokens, n_inter]
  const detail::Fp4Kernel kern =
      detail::fp4_kernel_for_x(isa, x, n_tokens * d_model);
  const int64_t ldx = detail::fp4_x_stride(kern.layout, d_model);
  const float* xs = x;
  if (kern.layout != detail::Fp4XLayout::kNatural) {
    float* xp = scratch + n_tokens * n_inter;  // [n_tokens, ldx]
    detail::fp4_prepare_x(kern.layout, x, n_tokens, d_model, xp);
    xs = xp;
  }
  const int64_t half = d_model / 2, n_sblocks = d_model / 32;
  gate_up_swiglu<detail::Fp4Tile>(n_inter, d_model, xs, ldx, n_tokens, route_weight, limit, h, opt, kern.tile, half,
                                  [&](detail::Fp4Tile& t, int64_t i) {
                                    t.w[0] = e.w1.packed + i * half;
                                    t.s[0] = e.w1.scales + i * n_sblocks;
                                    t.w[1] = e.w3.packed + i * half;
                                    t.s[1] = e.w3.scales + i * n_sblocks;
                                  });
  quantize_hidden(h, n_tokens, n_inter, isa);
  fp4_gemm(e.w2, h, n_tokens, out, MatmulOptions{true, isa, opt.pool, opt.amx_min_tokens});
}

void moe_expert_fp8(const Fp8Expert& e, const float* x, int64_t n_tokens, const float* route_weight, float limit,
                    float* out, float* scratch, const MatmulOptions& opt) {
  const int64_t n_inter = e.w1.n_rows, d_model = e.w1.n_cols;
  DSV4_CHECK(e.w3.n_rows == n_inter && e.w3.n_cols == d_model && e.w2.n_rows == d_model && e.w2.n_cols == n_inter,
             "moe_expert_fp8: inconsistent expert shapes");
  DSV4_CHECK(n_inter % 128 == 0, "moe_expert_fp8: n_inter must be a multiple of 128");
  if (n_tokens <= 0) return;
  const Isa isa = resolve_isa(opt.isa);
  if (isa == Isa::kAmx && n_tokens >= opt.amx_min_tokens)
    return moe_expert_fp8_unfused(e, x, n_tokens, route_weight, limit, out, scratch, opt);
  float* h = scratch;  // [n_tokens, n_inter]
  const int64_t scale_cols = (d_model + 127) / 128;
  // The prepared activations (kAvx512Bf16: ceil(d/128)·64 words per token) fit where the FP4 ones do.
  const detail::Fp8Operand op = detail::fp8_operand(isa, x, n_tokens, d_model, scratch + n_tokens * n_inter);
  gate_up_swiglu<detail::Fp8Tile>(n_inter, d_model, op.x, op.ldx, n_tokens, route_weight, limit, h, opt, op.tile, d_model,
                                  [&](detail::Fp8Tile& t, int64_t i) {
                                    t.w[0] = e.w1.codes + i * d_model;
                                    t.s[0] = e.w1.scales + (i / 128) * scale_cols;
                                    t.w[1] = e.w3.codes + i * d_model;
                                    t.s[1] = e.w3.scales + (i / 128) * scale_cols;
                                  });
  quantize_hidden(h, n_tokens, n_inter, isa);
  fp8_gemm(e.w2, h, n_tokens, out, MatmulOptions{true, isa, opt.pool, opt.amx_min_tokens});
}

void moe_expert_fp4_unfused(const Fp4Expert& e, const float* x, int64_t n_tokens, const float* route_weight,
                            float limit, float* out, float* scratch, const MatmulOptions& opt) {
  const int64_t n_inter = e.w1.n_rows;
  if (n_tokens <= 0) return;
  float *g = scratch, *u = g + n_tokens * n_inter, *h = u + n_tokens * n_inter;
  const MatmulOptions bf16_out{true, opt.isa, opt.pool, opt.amx_min_tokens};
  fp4_gemm(e.w1, x, n_tokens, g, bf16_out);
  fp4_gemm(e.w3, x, n_tokens, u, bf16_out);
  unfused_epilogue(g, u, n_tokens, n_inter, route_weight, limit, h);
  quantize_hidden(h, n_tokens, n_inter, Isa::kScalar);
  fp4_gemm(e.w2, h, n_tokens, out, bf16_out);
}

void moe_expert_fp8_unfused(const Fp8Expert& e, const float* x, int64_t n_tokens, const float* route_weight,
                            float limit, float* out, float* scratch, const MatmulOptions& opt) {
  const int64_t n_inter = e.w1.n_rows;
  if (n_tokens <= 0) return;
  float *g = scratch, *u = g + n_tokens * n_inter, *h = u + n_tokens * n_inter;
  const MatmulOptions bf16_out{true, opt.isa, opt.pool, opt.amx_min_tokens};
  fp8_gemm(e.w1, x, n_tokens, g, bf16_out);
  fp8_gemm(e.w3, x, n_tokens, u, bf16_out);
  unfused_epilogue(g, u, n_tokens, n_inter, route_weight, limit, h);
  quantize_hidden(h, n_tokens, n_inter, Isa::kScalar);
  fp8_gemm(e.w2, h, n_tokens, out, bf16_out);
}

}  // namespace dsv4::kernels
