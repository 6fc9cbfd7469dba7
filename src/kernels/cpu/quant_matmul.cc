// kernels: fp8_gemm / fp4_gemm / bf16_gemm drivers — ISA dispatch (once per call), the row split across
// the thread pool, and the row order: a call of up to 8 tokens (decode) streams its rows in decode order
// (row_pairs.h: a few far-apart forward streams); above that, cache blocking: a block of rows is swept
// for each group of up to 8 tokens, so for prefill the row block (≤ 64 KB of packed weights) stays in L2
// while every token group reuses it.
#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/formats.h"
#include "core/scratch.h"
#include "core/thread_pool.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/quant_tiles.h"
#include "kernels/cpu/row_pairs.h"

namespace dsv4::kernels {
namespace {

using detail::kTileTokens;

constexpr int64_t kRowBlock = 32;  // rows swept per token group (prefill cache blocking)
constexpr int64_t kRowGrain = 16;  // pool chunks start on multiples of this (keeps tile pairs fixed)

// Grow-only per-thread buffer for the prepared (FP4-permuted or aligned fp32) activations: allocates
// when a larger shape is first seen, never in steady-state decode; given back by scratch_end_step once steps
// keep asking much less (core/scratch.h). 64-byte aligned: the tiles load activations as whole zmm vectors,
// and a load that straddles two cache lines costs two load-port slots (at 8 tokens that doubled the BF16
// tile's time).
float* x_scratch(int64_t n) {
  constexpr int64_t kAlignFloats = 16;
  thread_local ScratchVec<float> buf;  // [n_tokens, ldx] + the alignment slack
  float* p = buf.grow(n + kAlignFloats);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - addr % 64) % 64) / sizeof(float);
}

// x [n_tokens, k] itself when 64-byte aligned or a single token, else an aligned copy: the fp32 tiles load
// every activation vector once per tile of rows, so with several tokens split loads add up.
const float* aligned_x(const float* x, int64_t n_tokens, int64_t k) {
  if (n_tokens <= 1 || reinterpret_cast<uintptr_t>(x) % 64 == 0) return x;
  float* xa = x_scratch(n_tokens * k);
  std::copy(x, x + n_tokens * k, xa);
  return xa;
}

#if defined(__x86_64__)

// The AMX path (every token count): packs x to bf16 tiles (refusing activations bf16 cannot hold exactly)
// and splits 16-row blocks across the pool. Returns false when the caller must use the vector tiles.
template <typename RowsFn>
bool try_amx(Isa isa, detail::AmxKOrder order, int64_t n_rows, int64_t k, const float* x, int64_t n_tokens,
             float* out, RowsFn rows_fn, const MatmulOptions& opt) {
  if (isa != Isa::kAmx || n_tokens < opt.amx_min_tokens || k % 32 != 0 || k == 0) return false;
  thread_local ScratchVec<uint32_t> xpack;  // x packed to bf16 pairs in AMX tile order
  uint32_t* xp = detail::align64(xpack.grow(detail::amx_packed_x_words(n_tokens, k) + 16));
  if (!detail::amx_pack_x(order, x, k, n_tokens, k, xp)) {
    detail::note_bf16_refusal();
    return false;
  }
  // One decode buffer per pool slot, owned by the calling thread (a worker's thread_local buffer would
  // first grow whenever the schedule first hands that worker a shape — in a warm step, too).
  const int slots = opt.pool != nullptr ? opt.pool->n_slots(n_rows, 16) : 1;
  const int64_t elems = detail::amx_apack_elems(k);
  thread_local ScratchVec<uint16_t> apacks;
  uint16_t* apack = detail::align64(apacks.grow(slots * elems + 32));
  auto body = [&](int64_t r0, int64_t r1, int slot) {
    rows_fn(detail::AmxRowsArgs{xp, x, k, n_tokens, r0, r1, out + r0, n_rows, opt.round_bf16, apack + slot * elems});
  };
  if (opt.pool != nullptr) {
    opt.pool->parallel_for(n_rows, 16, body);
  } else {
    body(0, n_rows, 0);
  }
  return true;
}
#endif

// x: [n_tokens, ldx] in the tile's layout. far_pairs (two-row tiles only; calls of more than 8 tokens:
// decode order has its own): tile q of a row block reads rows q and q + h (row_pairs.h) instead of two
// adjacent rows.
// set_tokens(t, t0): the tile's fields that follow its first token besides x (BF16's packed activations).
struct NoTokenFields {
  template <typename Tile>
  void operator()(Tile&, int64_t) const {}
};

template <typename Tile, typename TileFn, typename SetRow, typename SetTokens = NoTokenFields>
void run_rows(int64_t n_rows, int64_t n_tokens, int64_t k, const float* x, int64_t ldx, float* out,
              const MatmulOptions& opt, int64_t row_bytes, TileFn tile_fn, SetRow set_row, bool far_pairs = false,
              SetTokens set_tokens = {}) {
  constexpr int kRows = static_cast<int>(sizeof(Tile::w) / sizeof(Tile::w[0]));  // rows per tile
  DSV4_DCHECK(!far_pairs || kRows == 2, "run_rows: far pairs need two-row tiles");
  // A tile's sums into out: its tokens from t0, its rows first_row, first_row + step, ...
  auto store = [&](const Tile& t, int64_t t0, int64_t first_row, int64_t step) {
    for (int j = 0; j < t.n_tokens; ++j) {
      float* o = out + (t0 + j) * n_rows + first_row;
      for (int r = 0; r < t.n_rows; ++r) o[r * step] = opt.round_bf16 ? round_bf16(t.sums[r][j]) : t.sums[r][j];
    }
  };
  auto body = [&](int64_t r0, int64_t r1, int) {
    Tile t;
    t.k = k;
    t.ldx = ldx;
    if (n_tokens <= kTileTokens) {
      // One token group (decode, small batches): no row block is reused, so the tiles run in decode
      // order (row_pairs.h): kRows long streams far apart instead of adjacent rows.
      t.prefetch = detail::stream_prefetch_bytes();
      t.n_tokens = static_cast<int>(n_tokens);
      t.x = x;
      set_tokens(t, 0);
      const int64_t span = detail::stream_span_rows(kRows, row_bytes);
      for (int64_t nb = r0; nb < r1; nb += span) {
        const int64_t len = std::min(r1 - nb, span), step = detail::stream_step(len, kRows);
        for (int64_t q = 0; q < step; ++q) {
          t.n_rows = detail::stream_tile_rows(len, kRows, q);
          for (int r = 0; r < t.n_rows; ++r) set_row(t, r, nb + q + r * step);
          tile_fn(t);
          store(t, 0, nb + q, step);
        }
      }
      return;
    }
    t.prefetch = (far_pairs ? 1 : kRows) * row_bytes;  // the next tile's rows
    for (int64_t nb = r0; nb < r1; nb += kRowBlock) {
      const int64_t ne = std::min(r1, nb + kRowBlock);
      const int64_t step = far_pairs ? detail::far_pair_step(ne - nb) : 1;
      const int64_t n_tiles = far_pairs ? detail::far_pair_tiles(ne - nb) : (ne - nb + kRows - 1) / kRows;
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
        t.n_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
        t.x = x + t0 * ldx;
        set_tokens(t, t0);
        for (int64_t q = 0; q < n_tiles; ++q) {
          // The tile's rows: n, n + step, ...
          const int64_t n = far_pairs ? nb + q : nb + q * kRows;
          t.n_rows = far_pairs ? detail::far_pair_rows(ne - nb, q) : static_cast<int>(std::min<int64_t>(kRows, ne - n));
          for (int r = 0; r < t.n_rows; ++r) set_row(t, r, n + r * step);
          tile_fn(t);
          store(t, t0, n, step);
        }
      }
    }
  };
  if (opt.pool != nullptr) {
    opt.pool->parallel_for(n_rows, kRowGrain, body);
  } else if (n_rows > 0) {
    body(0, n_rows, 0);
  }
}

}  // namespace

Isa gemm_path_isa(Isa requested, int64_t n_tokens, int64_t n_cols, int64_t amx_min_tokens) {
  const Isa isa = resolve_isa(requested);
  if (isa == Isa::kAmx && (n_tokens < amx_min_tokens || n_cols % 32 != 0 || n_cols == 0)) return Isa::kAvx512;
  return isa;
}

int64_t fp8_weight_bytes(const Fp8Matrix& w) {
  return w.n_rows * w.n_cols + ((w.n_rows + 127) / 128) * ((w.n_cols + 127) / 128);
}

int64_t fp4_weight_bytes(const Fp4Matrix& w) { return w.n_rows * (w.n_cols / 2) + w.n_rows * (w.n_cols / 32); }

void fp8_gemm(const Fp8Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt) {
  DSV4_CHECK(w.n_rows >= 0 && w.n_cols >= 0 && n_tokens >= 0, "fp8_gemm: negative shape");
  if (w.n_rows == 0 || n_tokens == 0) return;
  const Isa isa = resolve_isa(opt.isa);
#if defined(__x86_64__)
  const detail::AmxFp8Job job{w.codes, w.scales, w.n_rows, w.n_cols};
  if (try_amx(
          isa, detail::AmxKOrder::kFp8, w.n_rows, w.n_cols, x, n_tokens, out,
          [&](const detail::AmxRowsArgs& a) { detail::fp8_gemm_amx_rows(job, a); }, opt))
    return;
#endif
  const int64_t scale_cols = (w.n_cols + 127) / 128;
  auto set_row = [&](detail::Fp8Tile& t, int r, int64_t row) {
    t.w[r] = w.codes + row * w.n_cols;
    t.s[r] = w.scales + (row / 128) * scale_cols;
  };
  const int64_t prep = detail::fp8_scratch_floats(isa, n_tokens, w.n_cols);
  detail::Fp8Operand op = detail::fp8_operand(isa, x, n_tokens, w.n_cols, prep > 0 ? x_scratch(prep) : nullptr);
  if (op.x == x) op.x = aligned_x(x, n_tokens, w.n_cols);  // plain floats (may reuse the scratch: a refusal's)
  // Above 8 tokens, rows shorter than a page (attn.wq_b and the indexer's wq_b: 1 KiB; w2 of the shared
  // expert: 2 KiB) pair row q with q + h (row_pairs.h), as FP4 does: adjacent rows put both of a tile's
  // streams in one page (dsv4 bench GEMV, 2 threads, AVX2: wq_b 16.5-17.6 -> 19.2-19.7 GB/s, 4096x2048
  // 18.2 -> 22.9-23.5, measured before decode order took the calls of up to 8 tokens).
  run_rows<detail::Fp8Tile>(w.n_rows, n_tokens, w.n_cols, op.x, op.ldx, out, opt, w.n_cols, op.tile, set_row,
                            /*far_pairs=*/w.n_cols < 4096);
}

int64_t bf16_weight_bytes(const Bf16Matrix& w) { return 2 * w.n_rows * w.n_cols; }

void bf16_gemm(const Bf16Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt) {
  DSV4_CHECK(w.n_rows >= 0 && w.n_cols >= 0 && n_tokens >= 0, "bf16_gemm: negative shape");
  if (w.n_rows == 0 || n_tokens == 0) return;
  const Isa isa = resolve_isa(opt.isa);
#if defined(__x86_64__)
  if (try_amx(
          isa, detail::AmxKOrder::kNatural, w.n_rows, w.n_cols, x, n_tokens, out,
          [&](const detail::AmxRowsArgs& a) { detail::bf16_gemm_amx_rows(w.data, w.n_rows, w.n_cols, a); }, opt))
    return;
#endif
  auto set_row = [&](detail::Bf16Tile& t, int r, int64_t row) {
    t.w[r] = w.data + row * w.n_cols;
    t.w_ok[r] = w.row_ok != nullptr ? static_cast<int8_t>(w.row_ok[row] != 0) : int8_t{-1};
  };
  const float* xa = aligned_x(x, n_tokens, w.n_cols);
  detail::Bf16TileFn tile = detail::bf16_tile_for(isa);
#if defined(__x86_64__)
  if (isa == Isa::kAvx512Bf16) {
    // VDPBF16PS: activations packed to bf16 once per call, each token checked against the tile's guard.
    const int64_t ldxb = detail::bf16_x_stride(w.n_cols);
    thread_local ScratchVec<uint16_t> xb_buf;  // [n_tokens, ldxb] + the alignment slack
    thread_local ScratchVec<uint8_t> ok_buf;   // [n_tokens]
    uint16_t* xb = detail::align64(xb_buf.grow(n_tokens * ldxb + 32));
    uint8_t* ok = ok_buf.grow(n_tokens);
    const int64_t n_ok = detail::bf16_pack_x(x, n_tokens, w.n_cols, xb, ok);
    if (n_ok < n_tokens) detail::note_bf16_refusal();
    if (n_ok > 0) {
      run_rows<detail::Bf16Tile>(w.n_rows, n_tokens, w.n_cols, xa, w.n_cols, out, opt, 2 * w.n_cols, tile, set_row,
                                 false, [&](detail::Bf16Tile& t, int64_t t0) {
                                   t.xb = xb + t0 * ldxb;
                                   t.ldxb = ldxb;
                                   t.x_ok = ok + t0;
                                 });
      return;
    }
    tile = detail::bf16_tile_avx512;  // no token inside the guard
  }
#endif
  run_rows<detail::Bf16Tile>(w.n_rows, n_tokens, w.n_cols, xa, w.n_cols, out, opt, 2 * w.n_cols, tile, set_row);
}

void bf16_rows_in_guard(const uint16_t* w, int64_t n_rows, int64_t k, uint8_t* row_ok) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint16_t* row = w + r * k;
    bool ok = true;
    for (int64_t i = 0; i < k; ++i) {
      const int m = row[i] & 0x7FFF;
      ok &= m == 0 || m >= detail::kBf16GuardMinMagnitude;
    }
    row_ok[r] = static_cast<uint8_t>(ok);
  }
}

void fp4_gemm(const Fp4Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt) {
  DSV4_CHECK(w.n_rows >= 0 && w.n_cols >= 0 && n_tokens >= 0, "fp4_gemm: negative shape");
  DSV4_CHECK(w.n_cols % 32 == 0, "fp4_gemm: n_cols must be a multiple of 32");
  if (w.n_rows == 0 || n_tokens == 0) return;
  const Isa isa = resolve_isa(opt.isa);
#if defined(__x86_64__)
  const detail::AmxFp4Job job{w.packed, w.scales, w.n_rows, w.n_cols};
  if (try_amx(
          isa, detail::AmxKOrder::kFp4, w.n_rows, w.n_cols, x, n_tokens, out,
          [&](const detail::AmxRowsArgs& a) { detail::fp4_gemm_amx_rows(job, a); }, opt))
    return;
#endif
  const detail::Fp4Kernel kern = detail::fp4_kernel_for_x(isa, x, n_tokens * w.n_cols);
  const float* xs = x;
  const int64_t ldx = detail::fp4_x_stride(kern.layout, w.n_cols);
  if (kern.layout != detail::Fp4XLayout::kNatural) {
    float* xp = x_scratch(n_tokens * ldx);
    detail::fp4_prepare_x(kern.layout, x, n_tokens, w.n_cols, xp);
    xs = xp;
  }
  const int64_t half = w.n_cols / 2, n_sblocks = w.n_cols / 32;
  run_rows<detail::Fp4Tile>(w.n_rows, n_tokens, w.n_cols, xs, ldx, out, opt, half, kern.tile,
                            [&](detail::Fp4Tile& t, int r, int64_t row) {
                              t.w[r] = w.packed + row * half;
                              t.s[r] = w.scales + row * n_sblocks;
                            },
                            /*far_pairs=*/true);
}

}  // namespace dsv4::kernels
