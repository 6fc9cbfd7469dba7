// kernels (internal): the per-ISA inner tiles behind fp8_gemm / fp4_gemm and the fused MoE expert.
// A tile computes up to kTileRows weight rows × kTileTokens activation rows in full, so a row's result
// never depends on which rows or tokens share its tile (batch- and thread-count invariance): every
// (row, token) sum follows the same K order whatever the tile's width.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels::detail {

inline constexpr int kTileRows = 2;
// 8 tokens per weight decode: a decode batch of 8 streams decodes each weight row once. The AVX-512
// tiles hold 8 token accumulators per row; the AVX2 tiles (16 registers) run tokens 4..7 as a second
// 4-token pass, which gives the same per-(row, token) results.
inline constexpr int kTileTokens = 8;

// E8M0 → float for every code (255 → NaN, 0 → 2^-127), so scale decoding is one table load.
extern const float kE8m0ToFloat[256];

// sums[r][t] = Σ_k x_t[k] · w_r[k] for r < n_rows, t < n_tokens.
//
// prefetch: bytes from each weight row to the row the caller will stream next (e.g. kTileRows rows on in
// one matrix), or 0. The vector tiles prefetch that row alongside their own: rows are a few KB, too short
// for the hardware prefetcher (which also stops at every 4 KB page) to reach full speed on its own, and
// the early touch also takes the next page's TLB walk off the critical path. A prefetch never faults, so
// the caller may point past the last row.
// Measured on the FP4 nibble-plane tile streaming 32 MiB from DRAM (one thread, huge pages, CPU time per
// call): without it a pass took 35-40% longer than with T0 one row ahead in moe_layer's row orders (17-80%
// over the orders tried); two or four rows ahead, the T1 or T2 hint, or a far T2 prefetch beside the
// near T0 one were each within noise or slower. What moved the stream was how many row streams a pass
// follows (the L2 streamer's look-ahead is per stream and page): dsv4_bench fp4_tile_stream/*. (That was an
// Intel core; on Zen 4 the same distance slows far-apart streams, and the GEMM drivers' decode order
// passes 0 on AMD before Zen 5 and 2 KiB on Intel and Zen 5: row_pairs.h stream_prefetch_bytes.)
struct Fp8Tile {
  const uint8_t* w[kTileRows];  // E4M3 codes of each row, [k]
  const uint8_t* s[kTileRows];  // E8M0 scales of each row's 128-row block, [ceil(k/128)]
  int n_rows;                   // 1..kTileRows
  const float* x;               // [n_tokens, ldx]
  int64_t ldx;
  int n_tokens;  // 1..kTileTokens
  int64_t k;
  int64_t prefetch = 0;
  float sums[kTileRows][kTileTokens];
};

// Same for FP4; x in the tile's Fp4XLayout (below).
struct Fp4Tile {
  const uint8_t* w[kTileRows];  // packed codes of each row, [k/2]
  const uint8_t* s[kTileRows];  // E8M0 scale per 32 of each row, [k/32]
  int n_rows;
  const float* x;
  int64_t ldx;
  int n_tokens;
  int64_t k;  // multiple of 32
  int64_t prefetch = 0;
  float sums[kTileRows][kTileTokens];
};

// BF16 weights (head, gate, compressor, indexer weights_proj, wo_a): plain fp32 dots on widened bf16.
// Four rows per tile: at 4..8 tokens the AVX-512 tile is bound by its activation loads (one per token per
// 16 columns, shared by every row of the tile), so four rows halve the loads per FMA of two; the AVX2 and
// scalar tiles take the rows two at a time / one at a time.
inline constexpr int kBf16TileRows = 4;
// The VDPBF16PS tile's weight guard: a row is inside it when every weight's magnitude bits (bits & 0x7FFF)
// are 0 or at least this (2^-56; inf and NaN pass).
inline constexpr uint16_t kBf16GuardMinMagnitude = 71 << 7;
struct Bf16Tile {
  const uint16_t* w[kBf16TileRows];  // [k] bf16 bits of each row
  // bf16_tile_avx512bf16 only: each row's guard when the caller knows it (Bf16Matrix::row_ok: 1 inside,
  // 0 outside), or -1: the tile checks the row on the weights it loads.
  int8_t w_ok[kBf16TileRows] = {-1, -1, -1, -1};
  int n_rows;                        // 1..kBf16TileRows
  const float* x;
  int64_t ldx;
  int n_tokens;
  int64_t k;
  int64_t prefetch = 0;
  // bf16_tile_avx512bf16 only: x packed to bf16 (bf16_pack_x), [n_tokens, ldxb] with ldxb a multiple of 32,
  // zero past k, 64-byte aligned; x_ok[j]: token j passed the VDPBF16PS guard (else its sums come from the
  // fp32 tile, which reads x).
  const uint16_t* xb = nullptr;
  int64_t ldxb = 0;
  const uint8_t* x_ok = nullptr;
  float sums[kBf16TileRows][kTileTokens];
};

using Bf16TileFn = void (*)(Bf16Tile& t);
using Fp8TileFn = void (*)(Fp8Tile& t);
using Fp4TileFn = void (*)(Fp4Tile& t);

void bf16_tile_scalar(Bf16Tile& t);
void fp8_tile_scalar(Fp8Tile& t);
void fp4_tile_scalar(Fp4Tile& t);
#if defined(__x86_64__)
void bf16_tile_avx2(Bf16Tile& t);
void bf16_tile_avx512(Bf16Tile& t);
// VDPBF16PS (quant_tiles_bf16_avx512bf16.cc; its fp32 order and guard are documented there).
void bf16_tile_avx512bf16(Bf16Tile& t);
void fp8_tile_avx2(Fp8Tile& t);
void fp4_tile_avx2(Fp4Tile& t);
void fp8_tile_avx512(Fp8Tile& t);
void fp4_tile_avx512(Fp4Tile& t);
// FP4 on fp32 FMAs over nibble planes (quant_tiles_fp4_avx512.cc); x in Fp4XLayout::kNibblePlanes.
void fp4_tile_avx512_planes(Fp4Tile& t);
// FP4 on VDPBF16PS over bf16 planes (quant_tiles_fp4_avx512bf16.cc); x in Fp4XLayout::kBf16Pairs, every
// activation of the call XExact::kBf16Dot.
void fp4_tile_avx512bf16(Fp4Tile& t);
#endif

Bf16TileFn bf16_tile_for(Isa isa);  // isa already resolved
Fp8TileFn fp8_tile_for(Isa isa);  // reads x as plain floats (kAvx512Bf16: the AVX-512 fp32 tile)
#if defined(__x86_64__)
// FP8 on VDPBF16PS (quant_tiles_fp8_avx512bf16.cc): Fp8Tile::x points at activations prepared by
// fp8_prepare_x_bf16pairs, ldx in 32-bit pairs (fp8_bf16pairs_stride).
void fp8_tile_avx512bf16(Fp8Tile& t);
// x [n_tokens, k] → out [n_tokens, fp8_bf16pairs_stride(k)] u32 words (stored in a float buffer), each
// two bf16 in the tile's pair order, zero past k. False (out then unspecified) unless every x is exact in
// bf16 and every nonzero |x| ≥ 2^-100 (so that no product or partial sum is denormal: VDPBF16PS flushes).
bool fp8_prepare_x_bf16pairs(const float* x, int64_t n_tokens, int64_t k, float* out);
// FP8 on AVX2 with the rebias decode (quant_tiles_avx2.cc): Fp8Tile::x points at activations prepared by
// fp8_prepare_x_avx2, ldx = fp8_avx2_stride(k). Each token's row holds x · 2^c (c ≤ 120, from the token's
// own largest magnitude: batch-invariant) and, at column k, the factor 2^(120 − c) its sums are multiplied by.
void fp8_tile_avx2_prepared(Fp8Tile& t);
// Whether kAvx2 runs fp8_tile_avx2_prepared (else fp8_tile_for(kAvx2), the half decode, on x itself). The
// rebias decode turns E4M3 subnormal codes into fp32 subnormals, which an FMA takes at full speed on AMD
// cores but through a microcode assist on Intel ones (fp8_gemm m=1 from DRAM on a Xeon: 0.7 GB/s, 2% of
// the read probe); the half decode's weights (w/256) are all fp32 normals. AMD: true, Intel: false.
bool fp8_avx2_rebias();
void fp8_prepare_x_avx2(const float* x, int64_t n_tokens, int64_t k, float* out);
int64_t fp8_avx2_stride(int64_t k);
#endif
inline int64_t fp8_bf16pairs_stride(int64_t k) { return (k + 127) / 128 * 64; }
// The FP8 tile a call on `isa` runs and the activations it reads. kAvx512Bf16 prepares x [n_tokens, k] into
// `scratch` (fp8_scratch_floats(isa, n_tokens, k) floats) for the VDPBF16PS tile; activations it refuses
// take the AVX-512 fp32 tile on x itself and count a bf16 refusal (bf16_refusals.h): the decision is per
// call, so a refusal moves every row of it to the other summation order. kAvx2 prepares x for
// fp8_tile_avx2_prepared (every call) where fp8_avx2_rebias(). Otherwise, and on the other ISAs:
// fp8_tile_for(isa) on x. isa already resolved.
struct Fp8Operand {
  Fp8TileFn tile;
  const float* x;
  int64_t ldx;
};
int64_t fp8_scratch_floats(Isa isa, int64_t n_tokens, int64_t k);
Fp8Operand fp8_operand(Isa isa, const float* x, int64_t n_tokens, int64_t k, float* scratch);
// How an FP4 tile reads its activations; the caller prepares them once per call (fp4_prepare_x) and
// points Fp4Tile::x / ldx at the prepared rows.
enum class Fp4XLayout {
  kNatural,     // floats in natural order (the scalar tile)
  kBlockOrder,  // floats; within each 32-block the 16 evens, then the 16 odds (the AVX-512 fp32 tile)
  kAvx2Fixed,   // the AVX2 tile's rows (fp4_prepare_x_avx2, Fp4Avx2Row below): per 64-element group, the two
                // 32-blocks as 30-bit fixed point in two int16 halves for VPMADDWD, or (a group that is not
                // exact so) floats for the fp32 FMA path
  kNibblePlanes,  // floats: per 128-element chunk c, element 128c + 8i + q at float 128c + 16q + i (q < 8,
                  // i < 16), the row zero-padded to a multiple of 128 (the AVX-512 nibble-plane tile)
  kBf16Pairs,     // bf16 pairs, one per float slot: per 128-element chunk c, slot 64c + 16q + i holds element
                  // 128c + 8i + q (low half) and 128c + 8i + 4 + q (high half) (q < 4, i < 16), zero-padded to
                  // a multiple of 128 elements (the VDPBF16PS tile)
};
#if defined(__x86_64__)
// Fp4XLayout::kAvx2Fixed. Each 32-block b of a token's row, largest exponent field e_b (the block's max
// magnitude lies in [2^(e_b−127), 2^(e_b−126))), is written as fixed point in units of q_b = 2^(e_b−156):
// x = F · q_b with |F| < 2^30, F = y · 2^15 + r, y = F >> 15 in [−2^15, 2^15), r = F & 0x7FFF. The tile
// sums y · (2w · 2^8) and r · (2w · 2^8) in exact int32 (VPMADDWD: 8 products per lane, < 2^30), so a
// block's dot is exact until one conversion to fp32. That holds when every x of the group is such a
// multiple of q_b (true for fake-quantized E4M3 activations: 4 significant bits over the 18 binades under
// a block maximum) and every e_b ≥ 39 (each unit stays a normal float); a group that fails any of it, or
// holds an inf / NaN, keeps floats (the fp32 FMA path). Per group g of G = ceil(k / 64), in one row of
// fp4_x_stride(kAvx2Fixed, k) floats:
//   y, r   int16 [G][4 vectors][2 lanes][8]: vector v, lane L, word i ← element 64g + 32L + 4i + off[v],
//          off = {0, 2, 1, 3} (the tile's weight vectors: low nibbles of even / odd bytes, then high)
//          (r written only in kFixedResidue groups)
//   unit   float [G][8]: 2^(e_b − 150), what one unit of a Σ y·(2w·2^8) is worth (of a Σ r·(2w·2^8):
//          2^(e_b − 165)), lanes 0..3 for block 2g, 4..7 for block 2g + 1
//   xf     float [G][64] (kFloat groups only): float 8v + 4L + d ← element 64g + 32L + off[v] + 4d,
//          off = {0, 2, 16, 18, 1, 3, 17, 19}
//   mode   Fp4Avx2Mode (one byte) [G]
// Past k (an odd last block) the group holds zeros.
enum class Fp4Avx2Mode : uint8_t { kFixed, kFixedResidue, kFloat };  // ordered: a group takes its blocks' max
template <typename F, typename I, typename B>
struct Fp4Avx2RowOf {
  I* y;
  I* r;
  F* unit;
  F* xf;
  B* mode;
};
using Fp4Avx2Row = Fp4Avx2RowOf<float, int16_t, Fp4Avx2Mode>;
using Fp4Avx2ConstRow = Fp4Avx2RowOf<const float, const int16_t, const Fp4Avx2Mode>;
inline int64_t fp4_avx2_groups(int64_t k) { return (k + 63) / 64; }
inline int64_t fp4_avx2_stride(int64_t k) {
  const int64_t g = fp4_avx2_groups(k);
  return 136 * g + (g + 31) / 32 * 8;  // y, r (32 floats each), unit (8), xf (64); mode bytes padded to 32
}
template <typename F>
auto fp4_avx2_row(F* row, int64_t k) {
  using I = std::conditional_t<std::is_const_v<F>, const int16_t, int16_t>;
  using B = std::conditional_t<std::is_const_v<F>, const Fp4Avx2Mode, Fp4Avx2Mode>;
  const int64_t g = fp4_avx2_groups(k);
  return Fp4Avx2RowOf<F, I, B>{reinterpret_cast<I*>(row), reinterpret_cast<I*>(row + 32 * g), row + 64 * g,
                               row + 72 * g, reinterpret_cast<B*>(row + 136 * g)};
}
// x [n_tokens, k] → out [n_tokens, fp4_avx2_stride(k)] (quant_tiles_fp4_avx2.cc: AVX2 code).
void fp4_prepare_x_avx2(const float* x, int64_t n_tokens, int64_t k, float* out);
#endif

// What a call's activations let an FP4 tile assume (x_exactness: one pass over them).
enum class XExact {
  kNone,     // some value is not exact in bf16
  kBf16,     // every value exact in bf16 (its low 16 bits zero)
  kBf16Dot,  // ... and every nonzero one at least 2^-100 in magnitude (bf16 exponent field ≥ 27, or inf /
             // NaN): times an FP4 (≥ 0.5) or FP8 (≥ 2^-9) weight, every nonzero product and partial sum is
             // then a multiple of ≥ 2^-126, so VDPBF16PS's denormals-are-zero / flush-to-zero never acts
};
XExact x_exactness(const float* x, int64_t n);
struct Fp4Kernel {
  Fp4TileFn tile;
  Fp4XLayout layout;
};
// x: what the call's activations allow (x_exactness; fake-quantized ones are always at least kBf16). On
// AVX-512 and AMX, kBf16 or better selects the nibble-plane tile; on kAvx512Bf16, kBf16Dot selects the
// VDPBF16PS tile and anything less falls back to the AVX-512 tiles (a bf16 refusal). The tiles' results
// differ in summation order only; each is batch- and thread-count invariant.
Fp4Kernel fp4_kernel_for(Isa isa, XExact x);
// The same for a call's activations x [n]: scans them (x_exactness) only on the ISAs whose choice depends
// on it (AVX-512, AVX512_BF16, AMX); the AVX2 tile decides per group itself, the scalar one reads any float.
Fp4Kernel fp4_kernel_for_x(Isa isa, const float* x, int64_t n);
// Floats one prepared row of k activations occupies (the tile's ldx).
int64_t fp4_x_stride(Fp4XLayout layout, int64_t k);
// x [n_tokens, k] → out [n_tokens, fp4_x_stride(layout, k)].
void fp4_prepare_x(Fp4XLayout layout, const float* x, int64_t n_tokens, int64_t k, float* out);

// bf16_tile_avx512bf16's activations: x [n_tokens, k] → out [n_tokens, bf16_x_stride(k)] bf16, zero past k;
// ok[t] = 1 when token t is inside the VDPBF16PS guard: every value exact in bf16 and every nonzero
// magnitude ≥ 2^-56 (infinities and bf16-exact NaNs pass: a non-finite sum stays non-finite on either path).
// Returns the tokens that passed. AVX-512 code (quant_tiles_bf16_avx512bf16.cc): call it only on that tier.
int64_t bf16_x_stride(int64_t k);
#if defined(__x86_64__)
int64_t bf16_pack_x(const float* x, int64_t n_tokens, int64_t k, uint16_t* out, uint8_t* ok);
#endif

// True when every x[i] is exact in bf16 (its low 16 bits are zero).
bool bf16_exact(const float* x, int64_t n);


// ---- AMX-BF16 GEMM (quant_gemm_amx.cc): every token count on AMX CPUs, k % 32 == 0 ----
// C[n, t] = Σ_k W[n, k]·X[t, k] with W decoded to bf16 in registers (exact: E2M1/E4M3 values, the FP4
// scale folded into the exponent where that stays exact) as the A operand and X in bf16 as the B operand,
// fp32 accumulation; FP8's per-128×128 scale is applied to each 128-K chunk's fp32 sum. Every (row, token)
// output follows one fixed sequence of tile operations whatever the batch, so results are batch- and
// thread-count invariant. amx_pack_x refuses (returns false) activations that bf16 cannot hold exactly,
// and the caller then uses the vector tiles.
#if defined(__x86_64__)
// The K order inside each 128-K chunk of the packed activations: natural (BF16) or the FP8 / FP4 decode's.
enum class AmxKOrder { kNatural, kFp8, kFp4 };
// Activations [n_tokens, k] (row stride ldx) → bf16 VNNI blocks [ceil(n_tokens/16)][4·ceil(k/128) steps]
// [16 pairs][min(n_tokens, 16) tokens] (u32 each: two bf16 of one token), zero-padded past k and n_tokens.
// `out` holds amx_packed_x_words(n_tokens, k) words.
int64_t amx_packed_x_words(int64_t n_tokens, int64_t k);
bool amx_pack_x(AmxKOrder order, const float* x, int64_t ldx, int64_t n_tokens, int64_t k, uint32_t* out);

// bf16 a thread's `apack` scratch must hold for a weight of k columns (a multiple of 32: consecutive
// buffers stay 64-byte aligned).
int64_t amx_apack_elems(int64_t k);
// p rounded up to a 64-byte boundary (callers allocate 32 bf16 of slack).
inline uint16_t* align64(uint16_t* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - addr % 64) % 64) / sizeof(uint16_t);
}
// The same for u32 buffers (callers allocate 16 words of slack).
inline uint32_t* align64(uint32_t* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - addr % 64) % 64) / sizeof(uint32_t);
}
struct AmxFp4Job {
  const uint8_t* packed;
  const uint8_t* scales;
  int64_t n_rows, k;
};
struct AmxFp8Job {
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t n_rows, k;
};
// Rows [r0, r1) (r0 a multiple of 16) for all n_tokens: out[t·ldo + (n − r0)].
struct AmxRowsArgs {
  const uint32_t* xpack;  // amx_pack_x of x, in the weight's AmxKOrder
  const float* x;         // the same activations as floats [n_tokens, ldx] (FP4's exact fallback)
  int64_t ldx;
  int64_t n_tokens;
  int64_t r0, r1;
  float* out;
  int64_t ldo;
  bool round_bf16;
  uint16_t* apack;  // amx_apack_elems(k), 64-byte aligned
};
void fp4_gemm_amx_rows(const AmxFp4Job& w, const AmxRowsArgs& a);
void fp8_gemm_amx_rows(const AmxFp8Job& w, const AmxRowsArgs& a);
void bf16_gemm_amx_rows(const uint16_t* w, int64_t n_rows, int64_t k, const AmxRowsArgs& a);
#endif

}  // namespace dsv4::kernels::detail
