#pragma once
// The AMX GEMM micro-kernel, written once over a tile backend: HardwareTiles (gemm_amx.cc) or
// ModelTiles (gemm_amx_model_avx512.cc). A call multiplies one K block of a <= 32-row A block
// by one 32-column B panel into four 16 x 16 accumulator tiles, then stores them and finishes
// with the AVX-512 epilogue the vector kernels use (partial sums, alpha, beta, bias, SiLU).
//
// Per 16 K steps (32 bf16 or 64 int8 of K): 2 A and 2 B tile loads (4 KiB) feed 4 TDPs of
// 16 x 16 x 16 steps each; one TDPBF16PS takes 16 cycles on Sapphire Rapids, so a chunk is 64
// cycles for 4 KiB of loads, 64 bytes per cycle. The loads may come from L2 (a kernel-only
// loop keeps most of the TDP rate with both operands there, docs/perf/gemm.md) but not from
// further out: the driver keeps the A block and the B panel in L2, and the tile requests what
// the driver reads next (GemmTile::side) into L2 while its TDPs run.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/x86/amx/amx_tile_config.h"
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels::amx {
namespace {

enum class Dot { bf16, s8s8, u8s8 };

template <class U, Dot kDot, int C, int A, int B>
__attribute__((always_inline)) inline void dot() {
  if constexpr (kDot == Dot::bf16) U::template dp_bf16<C, A, B>();
  else if constexpr (kDot == Dot::s8s8) U::template dp_s8s8<C, A, B>();
  else U::template dp_u8s8<C, A, B>();
}

// The accumulators in use: the top two (rows 0..15), and with kTwo the bottom two.
template <class U, bool kTwo>
void zero_accumulators() {
  U::template zero<kC00>();
  U::template zero<kC01>();
  if constexpr (kTwo) {
    U::template zero<kC10>();
    U::template zero<kC11>();
  }
}

// To and from a 32 x 32 block of 4-byte sums (row stride 128 bytes).
template <class U, bool kTwo>
void store_accumulators(void* sums) {
  char* s = static_cast<char*>(sums);
  U::template store<kC00>(s, 128);
  U::template store<kC01>(s + 64, 128);
  if constexpr (kTwo) {
    U::template store<kC10>(s + 16 * 128, 128);
    U::template store<kC11>(s + 16 * 128 + 64, 128);
  }
}
template <class U, bool kTwo>
void load_accumulators(const void* sums) {
  const char* s = static_cast<const char*>(sums);
  U::template load<kC00>(s, 128);
  U::template load<kC01>(s + 64, 128);
  if constexpr (kTwo) {
    U::template load<kC10>(s + 16 * 128, 128);
    U::template load<kC11>(s + 16 * 128 + 64, 128);
  }
}

// The side stream (GemmTile::side: rows interleaved, every row's first lines first) spread
// evenly over the tile's chunks, so that a DRAM stream the size of the next B panel runs at
// the pace of the TDPs instead of in a burst. Into L2 (side_l2) or L1.
class ChunkSideWalk {
 public:
  explicit ChunkSideWalk(const GemmTile& t) : lines_(t) {
    const int64_t chunks = std::max<int64_t>(1, (t.k_steps + 15) / 16);
    per_chunk_ = (lines_.left() + chunks - 1) / chunks;
  }
  __attribute__((always_inline)) void chunk() {
    for (int64_t i = 0; i < per_chunk_ && lines_.left() > 0; ++i) lines_.one();
  }

 private:
  SideLines lines_;
  int64_t per_chunk_ = 0;
};

// One chunk of K steps (16, or fewer under a tail configuration): A rows at a_stride, B one K
// step per 128 bytes with columns 0..15 in its first 64 bytes and 16..31 in its second.
template <class U, Dot kDot, bool kTwo>
__attribute__((always_inline)) inline void multiply_chunk(const char* a, int64_t a_stride, const char* b) {
  U::template load<kA0>(a, a_stride);
  U::template load<kB0>(b, 128);
  U::template load<kB1>(b + 64, 128);
  dot<U, kDot, kC00, kA0, kB0>();
  dot<U, kDot, kC01, kA0, kB1>();
  if constexpr (kTwo) {
    U::template load<kA1>(a + 16 * a_stride, a_stride);
    dot<U, kDot, kC10, kA1, kB0>();
    dot<U, kDot, kC11, kA1, kB1>();
  }
}

// Adds K steps [0, steps) into the accumulators. A K block that is not a multiple of 16 steps
// ends with a shorter chunk under its own configuration; loading a configuration zeroes every
// tile, so the accumulators wait in memory meanwhile. Blocks of DL shapes (K a multiple of 32
// or 64) never take this path.
template <class U, Dot kDot, bool kTwo>
void multiply_steps(const char* a, int64_t a_stride, const char* b, int64_t steps, ChunkSideWalk& side) {
  int64_t s = 0;
  for (; s + 16 <= steps; s += 16) {
    side.chunk();
    multiply_chunk<U, kDot, kTwo>(a + 4 * s, a_stride, b + 128 * s);
  }
  if (s == steps) return;
  side.chunk();
  alignas(64) char saved[kAmxMR * 128];
  store_accumulators<U, kTwo>(saved);
  U::configure(gemm_tile_config(int(steps - s)));
  load_accumulators<U, kTwo>(saved);
  multiply_chunk<U, kDot, kTwo>(a + 4 * s, a_stride, b + 128 * s);
  store_accumulators<U, kTwo>(saved);
  U::configure(gemm_tile_config());
  load_accumulators<U, kTwo>(saved);
}

template <class U, bool kTwo>
void bf16_block(const AmxGemmTile& at, float (&sums)[kAmxMR][32]) {
  const GemmTile& t = at.t;
  const char* a = static_cast<const char*>(t.a);
  const char* b = static_cast<const char*>(t.b);
  ChunkSideWalk side(t);
  if (!t.sb) {
    zero_accumulators<U, kTwo>();
    multiply_steps<U, Dot::bf16, kTwo>(a, at.a_row_bytes, b, t.k_steps, side);
    store_accumulators<U, kTwo>(sums);
    return;
  }
  // fp8 block scales: each 128-wide K group (64 pairs) is summed from zero on the tiles, then
  // scaled per row and added into f32 totals, as DeepGEMM promotes per group. The promotion
  // runs one group behind: group g's vector work is issued after group g + 1's TDPs, so it runs
  // while the tile unit works instead of between the groups (the tiles are not renamed, so the
  // next group cannot start before this one's sums are stored). Same terms in the same order.
  alignas(64) float total[kAmxMR][32];
  alignas(64) float group_sums[2][kAmxMR][32];
  const int64_t groups = t.k_steps / kScaleGroupSteps;
  auto promote = [&](int64_t g) {
    const float(&v)[kAmxMR][32] = group_sums[g & 1];
    for (int i = 0; i < t.m; ++i) {
      const __m512 s = _mm512_set1_ps((t.sa ? t.sa[i * t.lds_a + g] : 1.0f) * t.sb[g]);
      for (int h = 0; h < 2; ++h) {
        const __m512 x = _mm512_load_ps(&v[i][16 * h]);
        _mm512_store_ps(&total[i][16 * h],
                        g == 0 ? _mm512_mul_ps(x, s) : _mm512_fmadd_ps(x, s, _mm512_load_ps(&total[i][16 * h])));
      }
    }
  };
  for (int64_t g = 0; g < groups; ++g) {
    zero_accumulators<U, kTwo>();
    multiply_steps<U, Dot::bf16, kTwo>(a + 4 * kScaleGroupSteps * g, at.a_row_bytes,
                                       b + 128 * kScaleGroupSteps * g, kScaleGroupSteps, side);
    if (g > 0) promote(g - 1);
    store_accumulators<U, kTwo>(group_sums[g & 1]);
  }
  if (groups > 0) promote(groups - 1);
  for (int i = 0; i < t.m; ++i)
    for (int h = 0; h < 2; ++h)
      _mm512_store_ps(&sums[i][16 * h], groups > 0 ? _mm512_load_ps(&total[i][16 * h]) : _mm512_setzero_ps());
}

// Whether the tile writes D by non-temporal stores (GemmEpilogue::stream): its 32 columns are
// whole lines, each row's starting on a line, so no line of D is read before it is written.
inline bool streams_d(const GemmTile& t, bool s32) {
  if (!t.last || !t.last->stream || t.n != kGemmNR) return false;
  const int64_t es = s32 || !t.last->d_bf16 ? 4 : 2;
  return reinterpret_cast<uintptr_t>(t.last->d) % 64 == 0 && (t.last->ldd * es) % 64 == 0;
}

// The end of a streaming tile: the immediate end's arithmetic (end_value, the same bits), each
// row's 32 results stored as whole lines around the caches.
inline void stream_rows(const float (*sums)[32], int m, const GemmTile& t) {
  const GemmEpilogue& e = *t.last;
  const ColumnMasks all(kGemmNR);
  for (int i = 0; i < m; ++i) {
    __m512 v[2];
    for (int h = 0; h < 2; ++h) {
      v[h] = _mm512_load_ps(&sums[i][16 * h]);
      if (!t.first) v[h] = _mm512_add_ps(v[h], _mm512_loadu_ps(t.partial + i * t.ldp + 16 * h));
      v[h] = end_value(v[h], i, h, e, all);
    }
    if (e.d_bf16) {
      char* row = static_cast<char*>(e.d) + i * e.ldd * 2;
      _mm256_stream_si256(reinterpret_cast<__m256i*>(row), __m256i(_mm512_cvtneps_pbh(v[0])));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(row + 32), __m256i(_mm512_cvtneps_pbh(v[1])));
    } else {
      float* row = static_cast<float*>(e.d) + i * e.ldd;
      _mm512_stream_ps(row, v[0]);
      _mm512_stream_ps(row + 16, v[1]);
    }
  }
}

inline void stream_rows_s32(const int32_t (*sums)[32], int m, const GemmTile& t) {
  const GemmEpilogue& e = *t.last;
  const int32_t* partial = reinterpret_cast<const int32_t*>(t.partial);
  const ColumnMasks all(kGemmNR);
  for (int i = 0; i < m; ++i)
    for (int h = 0; h < 2; ++h) {
      __m512i v = _mm512_load_si512(&sums[i][16 * h]);
      if (!t.first) v = _mm512_add_epi32(v, _mm512_loadu_si512(partial + i * t.ldp + 16 * h));
      v = end_value_s32(v, i, h, e, all);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(static_cast<int32_t*>(e.d) + i * e.ldd + 16 * h), v);
    }
}

// D's rows are requested before the K loop, as the AVX-512 tiles do (a D larger than the
// caches otherwise takes its store misses in a burst after the loop); a streamed D is not
// read at all.
inline void prefetch_output(const GemmTile& t, bool streamed) {
  if (t.last && !streamed)
    for (int i = 0; i < t.m; ++i) prefetch_output_row(*t.last, i);
}

template <class U>
void gemm_tile_bf16(const AmxGemmTile& at) {
  const GemmTile& t = at.t;
  const bool streamed = streams_d(t, false);
  prefetch_output(t, streamed);
  alignas(64) float sums[kAmxMR][32];
  if (t.m > 16) bf16_block<U, true>(at, sums);
  else bf16_block<U, false>(at, sums);
  if (streamed) stream_rows(sums, t.m, t);
  else finish_rows(sums, t.m, t, ColumnMasks(t.n));
}

template <class U, bool kTwo>
void s8_block(const AmxGemmTile& at, int32_t (&sums)[kAmxMR][32]) {
  const GemmTile& t = at.t;
  zero_accumulators<U, kTwo>();
  const char* a = static_cast<const char*>(t.a);
  const char* b = static_cast<const char*>(t.b);
  ChunkSideWalk side(t);
  if (at.a_unsigned) multiply_steps<U, Dot::u8s8, kTwo>(a, at.a_row_bytes, b, t.k_steps, side);
  else multiply_steps<U, Dot::s8s8, kTwo>(a, at.a_row_bytes, b, t.k_steps, side);
  store_accumulators<U, kTwo>(sums);
}

template <class U>
void gemm_tile_s8(const AmxGemmTile& at) {
  const GemmTile& t = at.t;
  const bool streamed = streams_d(t, true);
  prefetch_output(t, streamed);
  alignas(64) int32_t sums[kAmxMR][32];
  if (t.m > 16) s8_block<U, true>(at, sums);
  else s8_block<U, false>(at, sums);
  if (streamed) stream_rows_s32(sums, t.m, t);
  else finish_rows_s32(sums, t.m, t, ColumnMasks(t.n));
}

template <class U>
void configure_tiles() {
  U::configure(gemm_tile_config());
}

}  // namespace
}  // namespace sol::kernels::amx
