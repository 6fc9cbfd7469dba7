// kernels: the compute probe's inner loops (see compute_probe.h), one per instruction. Each keeps every
// operand in registers and runs enough independent chains to cover the instruction's latency on every
// port that executes it: 16 zmm chains (a 4-cycle FMA on 2 ports needs 8), 4 AMX accumulator tiles fed
// by 2 A and 2 B tiles. Compiled for its ISA with a target pragma; called only after runtime detection.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,fma,avx2,amx-tile,amx-bf16")
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/compute_probe.h"

namespace dsv4::kernels::detail {
namespace {

constexpr int kChains = 16;

// h = h·31 + bits over every lane of every accumulator, chain by chain: no chain can be dropped as dead,
// and a test can compute the same word from a scalar model of the chains.
uint64_t fold(const __m512* acc) {
  alignas(64) uint32_t lanes[16];
  uint64_t h = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm512_store_si512(lanes, _mm512_castps_si512(acc[i]));
    for (uint32_t v : lanes) h = h * 31 + v;
  }
  return h;
}

}  // namespace

// acc = acc · m + c with m < 1 converges to c / (1 − m): the values stay normal however long it runs.
uint64_t compute_loop_fp32_fma(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i + 1));
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  }
  return fold(acc);
}

// acc += a·b over bf16 pairs with a = 1 and b = 2^-24: each lane grows by 2^-23 per instruction from
// i·2^-10, so an accumulator stays far from overflow, every product is a normal number (no denormal
// assists) and, below 1, every sum is exact (a test checks the count of products per lane that way).
uint64_t compute_loop_bf16_dot(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 0x1p-10f);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80), b = (__m512bh)_mm512_set1_epi16(0x3380);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  return fold(acc);
}

// acc += Σ of 4 products u8 · s8 per lane with every byte 1: each instruction adds 4 to every lane from i, so
// the count is exact (a test checks it) and no lane overflows in 2^29 instructions.
uint64_t compute_loop_int8_dot(int64_t iters) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512 lanes[kChains];
  for (int i = 0; i < kChains; ++i) lanes[i] = _mm512_castsi512_ps(acc[i]);
  return fold(lanes);
}

// Tiles 0..3: fp32 accumulators (16 × 16); 4, 5: A (16 rows × 32 bf16); 6, 7: B (16 pairs × 16 columns).
// Every accumulator tile is written once per four instructions, which covers tdpbf16ps's latency.
uint64_t compute_loop_amx_bf16(int64_t iters) {
  alignas(64) uint16_t ab[16 * 32];
  for (auto& v : ab) v = 0x3380;  // 2^-24: the sums grow slowly and stay normal
  amx_configure_tiles(8);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) uint32_t c[4][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  _tile_release();
  uint64_t h = 0;
  for (const auto& t : c)
    for (uint32_t v : t) h = h * 31 + v;
  return h;
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
