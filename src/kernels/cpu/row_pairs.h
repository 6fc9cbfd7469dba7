// kernels (internal): which weight rows a two-row tile reads, for weights whose rows are shorter than a
// page (FP4: k / 2 bytes, 1-2 KB at V4-Flash shapes). Pairing rows r and r + 1 puts both streams of a tile
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

}  // namespace dsv4::kernels::detail
