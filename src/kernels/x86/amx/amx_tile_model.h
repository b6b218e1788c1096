#pragma once
// A scalar model of the AMX tile registers, with the same interface as HardwareTiles: what the
// kernel template runs on machines without AMX (this project's CI), so its tiling, K tails,
// strides and epilogues are tested everywhere. It follows the instruction descriptions of the
// Intel SDM: a load fills `rows` x `bytes_per_row` and zeroes the rest of the register, a
// configuration zeroes every tile, and TDP* needs matching shapes (A's bytes per row / 4 ==
// B's rows, C's rows == A's rows, C's bytes == B's bytes) — where the hardware raises #UD, the
// model throws sol::Error, so a wrong configuration fails a test instead of passing silently.
// Sums follow the SDM's order (pair by pair, f32, round to nearest even); the hardware also
// flushes bf16 denormal inputs and f32 denormal results, which the model does not (tests
// compare with error norms).
#include <cstdint>
#include <cstring>

#include "kernels/x86/amx/amx_tile_config.h"
#include "sol/error.h"

namespace sol::kernels::amx {

struct ModelTiles {
  struct State {
    TileConfig config;
    bool configured = false;
    alignas(64) uint8_t tile[8][16 * 64] = {};
  };
  static State& state() {
    thread_local State s;
    return s;
  }
  static void configure(const TileConfig& c) {
    check(c.palette == 1, "amx model", "palette ", int(c.palette), " (only 1 is modelled)");
    for (int t = 0; t < 8; ++t)
      check(c.rows[t] <= 16 && c.bytes_per_row[t] <= 64 && c.bytes_per_row[t] % 4 == 0, "amx model",
            "tile ", t, " configured as ", int(c.rows[t]), " x ", int(c.bytes_per_row[t]), " bytes");
    State& s = state();
    s.config = c;
    s.configured = true;
    std::memset(s.tile, 0, sizeof s.tile);
  }
  static void release() { state().configured = false; }
  template <int T>
  static void zero() {
    std::memset(live(T), 0, 16 * 64);
  }
  template <int T>
  static void load(const void* base, int64_t stride) {
    uint8_t* dst = live(T);
    std::memset(dst, 0, 16 * 64);
    for (int r = 0; r < rows(T); ++r)
      std::memcpy(dst + r * 64, static_cast<const uint8_t*>(base) + r * stride, size_t(bytes(T)));
  }
  template <int T>
  static void store(void* base, int64_t stride) {
    const uint8_t* src = live(T);
    for (int r = 0; r < rows(T); ++r)
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, src + r * 64, size_t(bytes(T)));
  }
  template <int C, int A, int B>
  static void dp_bf16() {
    const int steps = shapes_agree(C, A, B);
    float* c = reinterpret_cast<float*>(live(C));
    const uint16_t* a = reinterpret_cast<const uint16_t*>(live(A));
    const uint16_t* b = reinterpret_cast<const uint16_t*>(live(B));
    for (int m = 0; m < rows(C); ++m)
      for (int n = 0; n < bytes(C) / 4; ++n) {
        float sum = c[m * 16 + n];
        for (int k = 0; k < steps; ++k) {
          sum += widen(a[m * 32 + 2 * k]) * widen(b[k * 32 + 2 * n]);
          sum += widen(a[m * 32 + 2 * k + 1]) * widen(b[k * 32 + 2 * n + 1]);
        }
        c[m * 16 + n] = sum;
      }
  }
  template <int C, int A, int B>
  static void dp_s8s8() {
    dp_int8<int8_t>(C, A, B);
  }
  template <int C, int A, int B>
  static void dp_u8s8() {
    dp_int8<uint8_t>(C, A, B);
  }

 private:
  static uint8_t* live(int t) {
    check(state().configured, "amx model", "tile ", t, " used without a tile configuration");
    return state().tile[t];
  }
  static int rows(int t) { return state().config.rows[t]; }
  static int bytes(int t) { return state().config.bytes_per_row[t]; }
  // The K steps (pairs or quads) of C += A * B, after the checks the hardware makes.
  static int shapes_agree(int c, int a, int b) {
    check(rows(c) == rows(a) && bytes(c) == bytes(b) && bytes(a) / 4 == rows(b), "amx model",
          "TDP shapes disagree (#UD): C ", rows(c), "x", bytes(c), " A ", rows(a), "x", bytes(a), " B ",
          rows(b), "x", bytes(b));
    return rows(b);
  }
  static float widen(uint16_t bf16) {
    const uint32_t bits = uint32_t(bf16) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  template <class AElem>
  static void dp_int8(int c_tile, int a_tile, int b_tile) {
    const int steps = shapes_agree(c_tile, a_tile, b_tile);
    int32_t* c = reinterpret_cast<int32_t*>(live(c_tile));
    const AElem* a = reinterpret_cast<const AElem*>(live(a_tile));
    const int8_t* b = reinterpret_cast<const int8_t*>(live(b_tile));
    for (int m = 0; m < rows(c_tile); ++m)
      for (int n = 0; n < bytes(c_tile) / 4; ++n) {
        uint32_t sum = uint32_t(c[m * 16 + n]);  // wraps modulo 2^32, as the hardware does
        for (int k = 0; k < steps; ++k)
          for (int j = 0; j < 4; ++j) sum += uint32_t(int32_t(a[m * 64 + 4 * k + j]) * int32_t(b[k * 64 + 4 * n + j]));
        c[m * 16 + n] = int32_t(sum);
      }
  }
};

}  // namespace sol::kernels::amx
