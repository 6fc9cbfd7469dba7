// kernels (internal): which weight rows a two-row tile reads, for weights whose rows are shorter than a
// page (FP4: k / 2 bytes, 1-2 KB at V4-Flash shapes; FP8 below 4096 columns). Pairing rows r and r + 1 puts both streams of a tile
// in one 4 KiB page, and the L2 streamer keeps one forward stream per page: half the lines then arrive on
// demand. Pairing row r with row r + h, half a block away, gives the tile two streams in different pages
// that the streamer follows independently (fp4_gemm m=1 from a 1 GiB working set, one thread, 2048x4096:
// 6.8 -> 9.6 GB/s per CPU-second). Which rows share a tile never changes a row's result.
// Baseline-only header (no ISA file includes it).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels::detail {

// A block of `len` rows runs as far_pair_tiles(len) tiles; tile q reads rows q and q + far_pair_step(len),
// or row q alone when that second row is past the block (the last tile of an odd block).
inline int64_t far_pair_step(int64_t len) { return (len + 1) / 2; }
inline int64_t far_pair_tiles(int64_t len) { return (len + 1) / 2; }
inline int far_pair_rows(int64_t len, int64_t q) { return q + far_pair_step(len) < len ? 2 : 1; }

// The i-th tile to run of n_tiles (a bijection on [0, n_tiles)): tiles 0, h, 1, h + 1, ... with h half the
// tiles, so a pass reads four streams (rows from q, from h, from step, from step + h) instead of two. The L2
// streamer follows each stream in its own page and prefetches a bounded distance ahead within it, so
// more streams keep more lines in flight on rows this short (w2's 1 KiB rows at n_inter 2048).
inline int64_t interleaved_tile(int64_t n_tiles, int64_t i) {
  const int64_t h = (n_tiles + 1) / 2;
  return i % 2 == 0 ? i / 2 : h + i / 2;
}

// Decode order (a call of one token group, fp8/fp4/bf16_gemm): a thread's rows are cut into spans of
// stream_span_rows, and within a span of `len` rows the R-row tiles read rows q, q + s, ..., q + (R - 1)s
// with s = stream_step(len, R), q = 0 .. s - 1: R forward streams up to 1 MiB apart, where adjacent rows
// would put a tile's R streams a row (1-8 KiB) apart. Measured on Zen 4 (one thread, 2 MiB pages, CPU
// time): a read loop with light work per line streams 25-29 GB/s as one stream, or as 2 or 4 streams
// 256 KiB to 16 MiB apart, but 11-16 GB/s as two streams 4-8 KiB apart and 16-19 GB/s as 4 streams 64 MiB
// apart (so a span stops at 1 MiB per stream: the head's 1 GiB would otherwise put its 4 streams 256 MiB
// apart). fp8_gemm m=1 k=4096 (32 MiB matrices, interleaved in one process) 11.8 -> 22-27 GB/s, bf16_gemm
// 14.6 -> 17-24, fp4_gemm k=2048 13 -> 16-18. Tile q's rows stop at len (the last tiles of a span that R
// does not divide hold fewer rows). Which rows share a tile changes no result. On Zen 3 (AVX2 tiles, one
// thread, compute-bound: a one-thread read probe of 12-15 GB/s against the tiles' ~9 GB/s) the model's b1
// with the old adjacent order and one-tile-ahead prefetch was within noise of this order (three
// interleaved rounds, attn_linear 105-115 vs 101-119 ms/token): the order is kept for every CPU.
inline constexpr int64_t kStreamBytes = int64_t{1} << 20;
inline int64_t stream_span_rows(int rows_per_tile, int64_t row_bytes) {
  return rows_per_tile * (row_bytes >= kStreamBytes ? 1 : kStreamBytes / std::max<int64_t>(row_bytes, 1));  // k = 0: empty rows
}
inline int64_t stream_step(int64_t len, int rows_per_tile) { return (len + rows_per_tile - 1) / rows_per_tile; }
inline int stream_tile_rows(int64_t len, int rows_per_tile, int64_t q) {
  const int64_t s = stream_step(len, rows_per_tile);
  int n = 0;
  while (n < rows_per_tile && q + n * s < len) ++n;
  return n;
}
// How far ahead of its own reads a tile prefetches in decode order (Fp8Tile::prefetch and the others).
// AMD before Zen 5 (family 0x19 and earlier): 0, the line it is about to load (the tiles' prefetch
// instruction stays, a no-op). Zen 4, one thread, 32 MiB matrices, CPU time, 8 passes of 1 GiB interleaved
// in one process (median / best GB per CPU-second) at 0 / 256 B / 1 KiB ahead in each stream: fp8_gemm m=1
// k=4096 23.3 / 22.2 / 19.1 (best 27.2 / 25.2 / 21.6), fp4_gemm k=2048 20.8 / 19.3 / 19.8, bf16_gemm m=1
// 19.3 / - / 15.5, m=2 18.2 / - / 13.9; a whole row ahead 10-25% slower still; at 8 tokens (compute-bound)
// all alike. The hardware streamers already follow these far-apart streams; an early demand for the same
// lines only takes miss buffers from them.
// Intel: 2 KiB. Its L2 streamer stops at each 4 KiB page. A Xeon with AMX (2 vCPUs, 2 threads, the dsv4
// bench decode GEMV rows from a 1 GiB working set, two runs, share of the read probe at 0 / 512 / 1024 /
// 2048 bytes), --isa avx512: fp4 w1/w3 54-53 / 67-68 / 61-70 / 72-74%, fp8 wq_b 54-56 / 73-74 / 78-79 /
// 81-86%, shared w2 52-47 / 70-72 / 79 / 84-87%; --isa avx2 fp4 w1/w3 24 / 53-57 / 57-66 / 64%. (AMX's own
// kernels, which serve the dense projections where the CPU has it, prefetch their next row block
// themselves: quant_gemm_amx.cc.)
// AMD Zen 5 (family 0x1A and later): 2 KiB. A plain read loop on 2 MiB pages, 2 threads, one line per
// stream and step, streams 1 MiB apart, medians of 7 passes of 1 GiB: 1 or 2 streams per thread read 56-59
// GB/s with or without a prefetch, but 4 streams 30 GB/s (8: 27) without and 45-47 with one 1-2 KiB ahead
// (8: 41); so the BF16 tile's four streams need it, and the two-row tiles' two streams gain from it as soon
// as their tokens' work spaces the loads out. fp8/bf16_gemm in the model's shapes, 2 threads, the same
// kind of loop over a 1 GiB working set, wall GB/s medians of 10 passes at 0 / 2048 / 3072 bytes: m=1
// fp8 4096x8192 42 / 51 / 55, bf16 8192x4096 39 / 44 / 41, the head (129280x4096) 40 / 44 / 41, fp8 k=4096
// 51-54 alike, fp8 32768x1024 57 / 54 / 54; m=4 fp8 2048x4096 18 / 29 / 29, bf16 8192x4096 24 / 28 / 27;
// m=8 fp8 4096x8192 16 / 20 / 20.
// Other vendors: 0, as AMD's older cores (unmeasured).
inline int64_t stream_prefetch_bytes() {
  static const int64_t kBytes = [] {
    const CpuModel cpu = cpu_model();
    const bool far = cpu.vendor == CpuVendor::kIntel || (cpu.vendor == CpuVendor::kAmd && cpu.family >= 0x1A);
    return far ? int64_t{2048} : int64_t{0};
  }();
  return kBytes;
}

}  // namespace dsv4::kernels::detail
