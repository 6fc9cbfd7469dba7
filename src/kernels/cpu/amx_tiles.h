// kernels (internal): the AMX tile configuration the AMX kernels share (attention_tiles_amx.cc,
// quant_gemm_amx.cc). Call only where kernels/cpu/isa.cc resolved kAmx, i.e. the CPU has AMX and the
// process holds the XTILEDATA permission. A plain declaration, not an inline: the definition lives in one
// AMX-flagged object (amx_tiles.cc), so no copy compiled for one ISA can serve callers built for another.
#pragma once

namespace dsv4::kernels::detail {

// Loads palette 1 with tiles [0, n_tiles) shaped 16 rows × 64 bytes (16 fp32 or 32 bf16 per row) and the
// other tiles unused, on the calling thread. n_tiles in [1, 8]. Pair with _tile_release() when done.
void amx_configure_tiles(int n_tiles);
// Same with 16 rows × colsb[t] bytes (4..64, a multiple of 4) for tile t < n_tiles.
void amx_configure_tiles_cols(int n_tiles, const int* colsb);

}  // namespace dsv4::kernels::detail
