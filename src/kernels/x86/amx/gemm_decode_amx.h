#pragma once
// The AMX decode kernels (kernels/gemm.h, AmxDecodeTile), written once over a tile backend:
// HardwareTiles (gemm_decode_amx.cc) or ModelTiles (gemm_decode_model_avx512.cc). A call
// computes one strip of D, up to 16 rows x 32 columns, over all of K, into two accumulator
// tiles, then ends through the AVX-512 epilogue the other kernels use.
//
// Decode streams B once and does 2M FLOPs per element; the matrix unit takes a 1 KiB tile of
// B per TDP (16 cycles), many times what memory delivers, so at any M <= 16 the time is the
// B stream. Two orientations, one summation order:
//   panel: D = X * B on a packed B panel (tile A: the <= 16 rows of X, tile B: 16 K steps of
//          the panel). The panels follow each other in memory: one sequential stream.
//   rows:  D^T = W * X^T on a plain [N, K] B (tile A: 16 rows of B read where they are
//          stored, tile B: X as K-pair rows); the sums come out transposed. No packing pass.
// Every element of D is the same sequence of pair products in either orientation (the tile
// product commutes per pair): chunks of 16 K steps in order into one accumulator from zero,
// fp8 groups of 64 steps summed on their own and added as sum * (a_scale * b_scale). So packed
// and plain B, any thread count, and any M give the same bits.
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/x86/amx/amx_tile_config.h"
#include "kernels/x86/avx512/e4m3x64_avx512.h"
#include "kernels/x86/avx512/e4m3_avx512.h"
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels::amx {
namespace {

// Tiles: two accumulators (columns 0-15 and 16-31 of the strip), X, and two B operands (the
// panel's two 16-column halves, or two 16-row blocks of W).
enum : int { kD0 = 0, kD1 = 1, kDX = 2, kDB0 = 3, kDB1 = 4 };

// panel: X is tile A (m rows x 16 steps), the panel halves tile B (16 steps x 16 columns),
//        accumulators m x 16.
// rows:  W blocks are tile A (16 rows x 16 steps), X is tile B (16 steps x m columns),
//        accumulators 16 x m.
inline TileConfig decode_tile_config(int m, bool rows) {
  TileConfig c;
  const uint8_t mr = uint8_t(m);
  const uint16_t mb = uint16_t(4 * m);
  if (!rows) {
    for (int t : {kD0, kD1, kDX}) c.rows[t] = mr, c.bytes_per_row[t] = 64;
    for (int t : {kDB0, kDB1}) c.rows[t] = 16, c.bytes_per_row[t] = 64;
  } else {
    for (int t : {kD0, kD1, kDX}) c.rows[t] = 16, c.bytes_per_row[t] = mb;
    for (int t : {kDB0, kDB1}) c.rows[t] = 16, c.bytes_per_row[t] = 64;
  }
  return c;
}

enum class DecodeDot { bf16, s8s8, u8s8 };

template <class U, DecodeDot kDot, int C, int A, int B>
__attribute__((always_inline)) inline void decode_dot() {
  if constexpr (kDot == DecodeDot::bf16) U::template dp_bf16<C, A, B>();
  else if constexpr (kDot == DecodeDot::s8s8) U::template dp_s8s8<C, A, B>();
  else U::template dp_u8s8<C, A, B>();
}

template <class U>
__attribute__((always_inline)) inline void zero_decode(bool two) {
  U::template zero<kD0>();
  if (two) U::template zero<kD1>();
}

// The side stream (GemmTile::side: the next strip's B, into L2) for one chunk of 16 steps.
__attribute__((always_inline)) inline void side_chunk(SideWalk& side) {
#pragma GCC unroll 16
  for (int s = 0; s < 16; ++s) side.step();
}

// ---- panel orientation ------------------------------------------------------------------

// An fp8 chunk c of a panel (64 bytes a step) widened into `buf` as the bf16 chunk a tile
// reads (128 bytes a step), with zeros past the panel's steps. Each step requests the line
// t.prefetch_b bytes ahead, as the bf16 chunks do: the next strip's request into L2 alone
// left every line a miss to L2 while the widening waited.
__attribute__((always_inline)) inline void widen_chunk(const GemmTile& t, int64_t c, char* buf) {
  const int64_t left = t.k_steps - 16 * c, steps = left < 16 ? left : 16;
  const char* f = static_cast<const char*>(t.b) + 64 * 16 * c;
  __m512i wide[2];
  for (int64_t s = 0; s < steps; ++s) {
    if (t.prefetch_b) _mm_prefetch(f + 64 * s + t.prefetch_b, _MM_HINT_T0);
    e4m3x64_to_bf16(_mm512_loadu_si512(f + 64 * s), wide);
    _mm512_store_si512(buf + 128 * s, wide[0]);
    _mm512_store_si512(buf + 128 * s + 64, wide[1]);
  }
  if (steps < 16) std::memset(buf + 128 * steps, 0, size_t(128 * (16 - steps)));
}

// Chunk c of a panel as two B tiles. A full bf16 chunk is loaded where it is (128 bytes a
// step); the last, partial chunk is assembled in `buf` with zeros past the panel's steps. An
// fp8 chunk comes already widened in `wide` (widen_chunk).
template <class U, DecodeDot kDot>
__attribute__((always_inline)) inline void panel_chunk(const AmxDecodeTile& at, int64_t c, bool two, char* buf,
                                                       const char* wide = nullptr) {
  const GemmTile& t = at.t;
  const int64_t left = t.k_steps - 16 * c, steps = left < 16 ? left : 16;
  const char* src;
  if (wide) {
    src = wide;
  } else if (steps < 16) {
    std::memcpy(buf, static_cast<const char*>(t.b) + 2048 * c, size_t(128 * steps));
    std::memset(buf + 128 * steps, 0, size_t(128 * (16 - steps)));
    src = buf;
  } else {
    src = static_cast<const char*>(t.b) + 2048 * c;
    if (t.prefetch_b)
      for (int l = 0; l < 32; ++l) _mm_prefetch(src + t.prefetch_b + 64 * l, _MM_HINT_T0);
  }
  U::template load<kDX>(static_cast<const char*>(t.a) + 64 * c, at.a_row_bytes);
  U::template load<kDB0>(src, 128);
  decode_dot<U, kDot, kD0, kDX, kDB0>();
  if (two) {
    U::template load<kDB1>(src + 64, 128);
    decode_dot<U, kDot, kD1, kDX, kDB1>();
  }
}

// Chunk c of a bf16 or fp8 panel. An fp8 panel's chunks are widened one ahead, into the two
// halves of `wide` in turn: a tile load waits for every older store to its bytes to reach L1,
// so loading the chunk just widened would stall the tiles on its stores; the chunk widened a
// step earlier has drained while the next was widened.
template <class U>
__attribute__((always_inline)) inline void bf16_panel_chunk(const AmxDecodeTile& at, int64_t c, int64_t chunks,
                                                            bool two, char* buf, char (*wide)[16 * 128]) {
  if (!at.t.b_fp8) return panel_chunk<U, DecodeDot::bf16>(at, c, two, buf);
  if (c == 0) widen_chunk(at.t, 0, wide[0]);
  if (c + 1 < chunks) widen_chunk(at.t, c + 1, wide[(c + 1) & 1]);
  panel_chunk<U, DecodeDot::bf16>(at, c, two, buf, wide[c & 1]);
}

// Accumulators to sums[m][32] (row stride 128 bytes).
template <class U>
__attribute__((always_inline)) inline void store_panel(void* sums, bool two) {
  U::template store<kD0>(sums, 128);
  if (two) U::template store<kD1>(static_cast<char*>(sums) + 64, 128);
}

template <class U>
void bf16_panel(const AmxDecodeTile& at) {
  const GemmTile& t = at.t;
  for (int i = 0; i < t.m; ++i) prefetch_output_row(*t.last, i);
  const bool two = t.n > 16;
  const int64_t chunks = (t.k_steps + 15) / 16;
  alignas(64) char buf[16 * 128];
  alignas(64) char wide[2][16 * 128];
  alignas(64) float sums[16][32];
  SideWalk side(t);
  zero_decode<U>(two);
  if (!t.sb) {
    for (int64_t c = 0; c < chunks; ++c) {
      bf16_panel_chunk<U>(at, c, chunks, two, buf, wide);
      side_chunk(side);
    }
    store_panel<U>(sums, two);
  } else {
    // fp8 block scales: every 64-step group from zero, then total += sum * (sa * sb).
    alignas(64) float total[16][32] = {};
    const int64_t groups = t.k_steps / kScaleGroupSteps;
    for (int64_t g = 0; g < groups; ++g) {
      if (g > 0) zero_decode<U>(two);
      for (int64_t c = 4 * g; c < 4 * g + 4; ++c) {
        bf16_panel_chunk<U>(at, c, chunks, two, buf, wide);
        side_chunk(side);
      }
      store_panel<U>(sums, two);
      for (int i = 0; i < t.m; ++i) {
        const __m512 s = _mm512_set1_ps((t.sa ? t.sa[i * t.lds_a + g] : 1.0f) * t.sb[g]);
        for (int h = 0; h < (two ? 2 : 1); ++h)
          _mm512_store_ps(&total[i][16 * h],
                          _mm512_fmadd_ps(_mm512_load_ps(&sums[i][16 * h]), s, _mm512_load_ps(&total[i][16 * h])));
      }
    }
    std::memcpy(sums, total, sizeof total);
  }
  if (!two)
    for (int i = 0; i < t.m; ++i) _mm512_store_ps(&sums[i][16], _mm512_setzero_ps());
  finish_rows(sums, t.m, t, ColumnMasks(t.n));
}

template <class U>
void s8_panel(const AmxDecodeTile& at) {
  const GemmTile& t = at.t;
  for (int i = 0; i < t.m; ++i) prefetch_output_row(*t.last, i);
  const bool two = t.n > 16;
  const int64_t chunks = (t.k_steps + 15) / 16;
  alignas(64) char buf[16 * 128];
  alignas(64) int32_t sums[16][32];
  SideWalk side(t);
  zero_decode<U>(two);
  for (int64_t c = 0; c < chunks; ++c) {
    if (at.a_unsigned) panel_chunk<U, DecodeDot::u8s8>(at, c, two, buf);
    else panel_chunk<U, DecodeDot::s8s8>(at, c, two, buf);
    side_chunk(side);
  }
  store_panel<U>(sums, two);
  if (!two)
    for (int i = 0; i < t.m; ++i) _mm512_store_si512(&sums[i][16], _mm512_setzero_si512());
  finish_rows_s32(sums, t.m, t, ColumnMasks(t.n));
}

// ---- rows orientation -------------------------------------------------------------------

// 16 rows of bf16 W from row r0 (rows from t.n on are zero), K values [32c, 32c + 32) (zero
// past at.k), as a tile in `buf` (64 bytes a row).
__attribute__((always_inline)) inline void assemble_w(const AmxDecodeTile& at, int r0, int64_t c, char* buf) {
  const int64_t k0 = 32 * c, left = at.k - k0;
  const int valid = int(left < 32 ? left : 32);
  const __mmask32 mask = valid >= 32 ? ~__mmask32(0) : (__mmask32(1) << valid) - 1;
  for (int r = 0; r < 16; ++r) {
    __m512i v = _mm512_setzero_si512();
    if (r0 + r < at.t.n) v = _mm512_maskz_loadu_epi16(mask, static_cast<const char*>(at.w) + (r0 + r) * at.w_stride + 2 * k0);
    _mm512_store_si512(buf + 64 * r, v);
  }
}

// fp8 W, chunks 2p and 2p + 1 of its (one or two) 16-row blocks, widened from one 64-byte
// line of each row: wide[h][b] is chunk 2p + h of block b as a tile (64 bytes a row; zero
// past at.k and for rows from t.n on). Each row also requests its line t.prefetch_b bytes
// ahead: 32 row streams, which the next strip's request into L2 alone left waiting on L2.
__attribute__((always_inline)) inline void widen_w_pair(const AmxDecodeTile& at, int64_t p, bool two,
                                                        char (*wide)[2][1024]) {
  const int64_t k0 = 64 * p, left = at.k - k0;
  const int valid = int(left < 64 ? left : 64);
  const __mmask64 mask = valid >= 64 ? ~__mmask64(0) : (__mmask64(1) << valid) - 1;
  for (int b = 0; b < (two ? 2 : 1); ++b)
    for (int r = 0; r < 16; ++r) {
      __m512i v[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      if (16 * b + r < at.t.n) {
        const char* line = static_cast<const char*>(at.w) + (16 * b + r) * at.w_stride + k0;
        if (at.t.prefetch_b) _mm_prefetch(line + at.t.prefetch_b, _MM_HINT_T0);  // the row's line ahead
        e4m3x64_to_bf16(_mm512_maskz_loadu_epi8(mask, line), v);
      }
      _mm512_store_si512(wide[0][b] + 64 * r, v[0]);
      _mm512_store_si512(wide[1][b] + 64 * r, v[1]);
    }
}

// Chunk c: X's 16 steps (4m bytes a step) and W's one or two 16-row blocks. A full bf16 block
// is loaded from B itself; a block with rows past N or a chunk past K is assembled in `buf`;
// fp8 blocks come widened in `wide` (widen_w_pair).
template <class U>
__attribute__((always_inline)) inline void rows_chunk(const AmxDecodeTile& at, int64_t c, bool two, char* buf,
                                                      char (*wide)[1024] = nullptr) {
  const GemmTile& t = at.t;
  U::template load<kDX>(static_cast<const char*>(t.a) + 64 * t.m * c, 4 * t.m);
  const bool full_k = 32 * (c + 1) <= at.k;
  const char* w = static_cast<const char*>(at.w) + 64 * c;
  if (wide) {
    U::template load<kDB0>(wide[0], 64);
  } else if (full_k && t.n >= 16) {
    U::template load<kDB0>(w, at.w_stride);
  } else {
    assemble_w(at, 0, c, buf);
    U::template load<kDB0>(buf, 64);
  }
  decode_dot<U, DecodeDot::bf16, kD0, kDB0, kDX>();
  if (!two) return;
  if (wide) {
    U::template load<kDB1>(wide[1], 64);
  } else if (full_k && t.n >= 32) {
    U::template load<kDB1>(w + 16 * at.w_stride, at.w_stride);
  } else {
    assemble_w(at, 16, c, buf + 1024);
    U::template load<kDB1>(buf + 1024, 64);
  }
  decode_dot<U, DecodeDot::bf16, kD1, kDB1, kDX>();
}

// Chunk c of bf16 or fp8 W. fp8 W is widened a pair of chunks ahead, into the two halves of
// `wide` in turn, for the reason bf16_panel_chunk gives.
template <class U>
__attribute__((always_inline)) inline void w_chunk(const AmxDecodeTile& at, int64_t c, int64_t chunks, bool two,
                                                   char* buf, char (*wide)[2][2][1024]) {
  if (!at.w_fp8) return rows_chunk<U>(at, c, two, buf);
  const int64_t p = c / 2;
  if (c == 0) widen_w_pair(at, 0, two, wide[0]);
  if (c % 2 == 0 && 2 * (p + 1) < chunks) widen_w_pair(at, p + 1, two, wide[(p + 1) & 1]);
  rows_chunk<U>(at, c, two, buf, wide[p & 1][c % 2]);
}

// Accumulators to sums_t[32][16] (strip column n's sums over the m lanes; stride 64 bytes).
template <class U>
__attribute__((always_inline)) inline void store_rows(float (*sums_t)[16], bool two) {
  U::template store<kD0>(sums_t, 64);
  if (two) U::template store<kD1>(sums_t + 16, 64);
}

template <class U>
void bf16_rows(const AmxDecodeTile& at) {
  const GemmTile& t = at.t;
  for (int i = 0; i < t.m; ++i) prefetch_output_row(*t.last, i);
  const bool two = t.n > 16;
  const int rows = two ? 32 : 16;
  const int64_t chunks = (t.k_steps + 15) / 16;
  const __mmask16 lanes = __mmask16((1u << t.m) - 1);
  alignas(64) char buf[2 * 1024];
  alignas(64) char wide[2][2][2][1024];
  alignas(64) float sums_t[32][16];
  SideWalk side(t);
  zero_decode<U>(two);
  if (!t.sb) {
    for (int64_t c = 0; c < chunks; ++c) {
      w_chunk<U>(at, c, chunks, two, buf, wide);
      side_chunk(side);
    }
    store_rows<U>(sums_t, two);
  } else {
    alignas(64) float total[32][16] = {};
    const int64_t groups = t.k_steps / kScaleGroupSteps;
    for (int64_t g = 0; g < groups; ++g) {
      if (g > 0) zero_decode<U>(two);
      for (int64_t c = 4 * g; c < 4 * g + 4; ++c) {
        w_chunk<U>(at, c, chunks, two, buf, wide);
        side_chunk(side);
      }
      store_rows<U>(sums_t, two);
      // Lane i of row n: the a scale of D's row i (at.sa_lanes, or 1) times the b scale.
      const __m512 sa = at.sa_lanes ? _mm512_maskz_loadu_ps(lanes, at.sa_lanes + 16 * g) : _mm512_set1_ps(1.0f);
      const __m512 s = _mm512_mul_ps(sa, _mm512_set1_ps(t.sb[g]));
      for (int r = 0; r < rows; ++r)
        _mm512_store_ps(total[r], _mm512_fmadd_ps(_mm512_maskz_load_ps(lanes, sums_t[r]), s, _mm512_load_ps(total[r])));
    }
    std::memcpy(sums_t, total, sizeof total);
  }
  // Transposed into D's rows: sums[i][n] = sums_t[n][i].
  alignas(64) float sums[16][32];
  const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(16));
  for (int i = 0; i < t.m; ++i) {
    const __m512i at_i = _mm512_add_epi32(column, _mm512_set1_epi32(i));
    _mm512_store_ps(&sums[i][0], _mm512_i32gather_ps(at_i, &sums_t[0][0], 4));
    _mm512_store_ps(&sums[i][16], two ? _mm512_i32gather_ps(at_i, &sums_t[16][0], 4) : _mm512_setzero_ps());
  }
  finish_rows(sums, t.m, t, ColumnMasks(t.n));
}

template <class U>
void configure_decode(int m, bool rows) {
  U::configure(decode_tile_config(m, rows));
}

}  // namespace
}  // namespace sol::kernels::amx
