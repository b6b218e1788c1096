#pragma once
// The 64-byte operand of LDTILECFG (palette 1: eight tiles of up to 16 rows x 64 bytes), and
// the configurations the GEMM kernels use. Plain C++: the hardware backend and the scalar
// model of the tiles (amx_tile_model.h) load the same bytes.
#include <cstdint>
#include <initializer_list>

namespace sol::kernels::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tile registers of the GEMM kernels: four 16 x 16 accumulators (a 32 x 32 block of D), two
// A tiles (16 rows each) and two B tiles (16 columns each).
enum : int { kC00 = 0, kC01 = 1, kC10 = 2, kC11 = 3, kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7 };

// Every tile full: A tiles 16 rows x 64 bytes (32 bf16 or 64 int8 of K), B tiles 16 K steps
// x 64 bytes (16 columns x one pair or quad), accumulators 16 x 16 x 4 bytes.
// `k_steps` < 16 shortens the K extent (the last, partial chunk of a K block): A tiles carry
// 4 * k_steps bytes per row and B tiles k_steps rows, as TDP* requires (A bytes / 4 == B rows).
inline TileConfig gemm_tile_config(int k_steps = 16) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.bytes_per_row[t] = 64;
  }
  for (int t : {kA0, kA1}) c.bytes_per_row[t] = uint16_t(4 * k_steps);
  for (int t : {kB0, kB1}) c.rows[t] = uint8_t(k_steps);
  return c;
}

}  // namespace sol::kernels::amx
