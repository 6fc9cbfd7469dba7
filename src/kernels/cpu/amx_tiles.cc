// kernels: AMX tile configuration (compiled with -mamx-tile; reached only on the AMX path). See amx_tiles.h.
#if defined(__x86_64__)
#include "kernels/cpu/amx_tiles.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace dsv4::kernels::detail {
namespace {

// The 64-byte LDTILECFG operand (Intel SDM, "Tile configuration").
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

}  // namespace

void amx_configure_tiles(int n_tiles) {
  const int colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
  amx_configure_tiles_cols(n_tiles, colsb);
}

void amx_configure_tiles_cols(int n_tiles, const int* colsb) {
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette_id = 1;
  for (int t = 0; t < n_tiles; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = static_cast<uint16_t>(colsb[t]);
  }
  // NOTE: GCC 12's _tile_loadconfig declares a read of only the first 8 bytes of its operand, so the stores
  // above may be dropped as dead (seen here: garbage rows/colsb, #GP in LDTILECFG). This empty asm reads
  // all 64 bytes, which keeps every store.
  asm volatile("" : : "m"(cfg));
  _tile_loadconfig(&cfg);
}

}  // namespace dsv4::kernels::detail
#endif
