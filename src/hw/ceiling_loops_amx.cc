// AMX ceiling loops: TDPBF16PS and TDPBSSD on tiles that stay loaded, so only the matrix
// unit's own throughput is timed.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "hw/ceiling_loops.h"
#include "kernels/x86/amx/amx_tile_config.h"

namespace sol::ceiling_loops {

namespace {

using kernels::amx::TileConfig;  // the LDTILECFG operand the GEMM kernels load too

// GCC 12's _tile_loadconfig() declares only 8 of the 64 bytes as read, so at -O1 and above
// the stores filling the rest may be dropped and LDTILECFG faults (DESIGN §9). Passing the
// whole struct as a memory operand makes every byte live.
void load_tile_config(const TileConfig& config) {
  __asm__ volatile("ldtilecfg %0" : : "m"(config));
}

void configure_full_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.bytes_per_row[t] = 64;
  }
  load_tile_config(config);
}

// Four accumulators (tmm0-3) in a 2x2 block over two A tiles (tmm4-5) and two B tiles
// (tmm6-7): all eight tile registers in use, and each TDP is independent of the three before
// it, more than the one accumulator that already hides TDP latency (DESIGN §9).
constexpr int kTdpPerIteration = 4;

// Operands: 16 rows x 64 bytes, filled with small values so sums stay finite.
struct alignas(64) TileOperands {
  uint8_t a[16 * 64];
  uint8_t b[16 * 64];
  int32_t c[16 * 16];
};

void load_operand_tiles(const TileOperands& t) {
  _tile_loadd(4, t.a, 64);
  _tile_loadd(5, t.a, 64);
  _tile_loadd(6, t.b, 64);
  _tile_loadd(7, t.b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// Stores the accumulators so their work is observable, then frees the tile state.
void finish(TileOperands& t) {
  _tile_stored(0, t.c, 64);
  _tile_stored(1, t.c, 64);
  _tile_stored(2, t.c, 64);
  _tile_stored(3, t.c, 64);
  _tile_release();
  __asm__ volatile("" : : "r"(t.c) : "memory");
}

}  // namespace

double amx_bf16(long iterations) {
  TileOperands t;
  const uint16_t one_64th = 0x3C80;  // bf16 1/64
  for (int i = 0; i < 16 * 32; ++i) {
    std::memcpy(t.a + 2 * i, &one_64th, 2);
    std::memcpy(t.b + 2 * i, &one_64th, 2);
  }
  configure_full_tiles();
  load_operand_tiles(t);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  finish(t);
  constexpr double kFlopPerTdp = 16.0 * 16 * 32 * 2;  // M x N x K(bf16 pairs x 2) x mul+add
  return double(iterations) * kTdpPerIteration * kFlopPerTdp;
}

double amx_int8(long iterations) {
  TileOperands t;
  std::memset(t.a, 1, sizeof(t.a));
  std::memset(t.b, 1, sizeof(t.b));
  configure_full_tiles();
  load_operand_tiles(t);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  finish(t);
  constexpr double kOpPerTdp = 16.0 * 16 * 64 * 2;
  return double(iterations) * kTdpPerIteration * kOpPerTdp;
}

}  // namespace sol::ceiling_loops
