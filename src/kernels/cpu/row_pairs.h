// kernels (internal): which weight rows a two-row tile reads, for weights whose rows are shorter than a
// page (FP4: k / 2 bytes, 1-2 KB at V4-Flash shapes; FP8 below 4096 columns). Pairing rows r and r + 1 puts both streams of a tile
// in one 4 KiB page, and the L2 streamer keeps one forward stream per page: half the lines then arrive on
// demand. Pairing row r with row r + h, half a block away, gives the tile two streams in different pages
// that the streamer follows independently (fp4_gemm m=1 from a 1 GiB working set, one thread, 2048x4096:
// 6.8 -> 9.6 GB/s per CPU-second). Which rows share a tile never changes a row's result.
// Baseline-only header (no ISA file includes it).
#pragma once

#include <cstdint>

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

}  // namespace dsv4::kernels::detail
