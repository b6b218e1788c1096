// The A-panel packer of the AVX-512 GEMM: kGemmMR rows of 32-bit K steps (f32, bf16 pairs,
// int8 quads, or e4m3 pairs widened to bf16 pairs) into the micro-kernel's K-major panel,
// panel[s * kGemmMR + i] = row i, step s. A transpose, done 16 steps at a time in registers:
// 12 row vectors in, 48 lane stores out.
//
// Why it is a kernel and not plain C++: the plain loop moves one 32-bit step per row per
// iteration, so a cold A row (a different page for each of the 12 rows) is asked for one
// line at a time and every 16 steps wait for DRAM — 176 round trips for a 256 x 256 bf16
// block, 18 us of a 100 us 256^3 GEMM (docs/perf/gemm.md, session 4). Here each row is read a
// whole line per load and the lines `kAheadChunks` chunks ahead (and the next panel's first
// ones) are requested while this chunk is transposed.
#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/x86/avx512/e4m3_avx512.h"  // and <immintrin.h>, with GCC 12's warnings quieted

namespace sol::kernels {
namespace {

// Lines requested ahead of the chunk being packed, per row: ~4 rows x 12 x 64 B in flight.
constexpr int64_t kAheadChunks = 4;

// 16 steps of one row: a line of 32-bit steps, or 32 e4m3 bytes widened to 16 bf16 pairs.
// `valid` steps (1..16) are read; the rest are zero.
[[gnu::always_inline]] inline __m512i load_steps(const void* row, int64_t chunk, int valid, bool e4m3,
                                                 __m512i flip) {
  const __mmask16 mask = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
  if (e4m3) {
    const __mmask32 bytes = valid >= 16 ? __mmask32(0xFFFFFFFF) : __mmask32((1ull << (2 * valid)) - 1);
    const __m256i raw = _mm256_maskz_loadu_epi8(bytes, static_cast<const char*>(row) + 32 * chunk);
    return _mm512_maskz_mov_epi32(mask, e4m3x32_to_bf16(raw));
  }
  const __m512i v = _mm512_maskz_loadu_epi32(mask, static_cast<const char*>(row) + 64 * chunk);
  return _mm512_maskz_xor_epi32(mask, v, flip);
}

// Bytes of one chunk (16 steps) of a source row.
inline int64_t chunk_bytes(bool e4m3) { return e4m3 ? 32 : 64; }

// Steps 4Q..4Q+3 (of `valid`) of the transposed chunk: lane Q of u[j] holds rows 0-3 of step
// 4Q + j, lane Q of u[4 + j] rows 4-7, of u[8 + j] rows 8-11.
template <int Q>
[[gnu::always_inline]] inline void store_lane(const __m512i (&u)[kGemmMR], int valid, uint32_t* out) {
  for (int j = 0; j < 4; ++j) {
    if (4 * Q + j >= valid) return;
    uint32_t* step = out + (4 * Q + j) * kGemmMR;
    for (int g = 0; g < 3; ++g)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(step + 4 * g), _mm512_extracti32x4_epi32(u[4 * g + j], Q));
  }
}

void transpose_store(const __m512i (&r)[kGemmMR], int valid, uint32_t* out) {
  __m512i u[kGemmMR];
  for (int g = 0; g < 3; ++g) {  // rows 4g..4g+3
    const __m512i t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
    const __m512i t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2);  // per lane: step 4q + 0 of the 4 rows
    u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  store_lane<0>(u, valid, out);
  store_lane<1>(u, valid, out);
  store_lane<2>(u, valid, out);
  store_lane<3>(u, valid, out);
}

}  // namespace

void pack_a_panel_avx512(const void* const (&rows)[kGemmMR], const void* const* next_rows, int64_t steps,
                         uint32_t flip, bool e4m3, uint32_t* panel) {
  const __m512i flip16 = _mm512_set1_epi32(int(flip));
  const int64_t chunks = (steps + 15) / 16, line = chunk_bytes(e4m3);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t ahead = c + kAheadChunks;
    for (int i = 0; i < kGemmMR; ++i) {
      const void* row = ahead < chunks ? rows[i] : next_rows ? next_rows[i] : nullptr;
      const int64_t at = ahead < chunks ? ahead : ahead - chunks;
      if (row) _mm_prefetch(static_cast<const char*>(row) + at * line, _MM_HINT_T0);
    }
    const int valid = int(steps - 16 * c < 16 ? steps - 16 * c : 16);
    __m512i r[kGemmMR];
    for (int i = 0; i < kGemmMR; ++i) r[i] = load_steps(rows[i], c, valid, e4m3, flip16);
    transpose_store(r, valid, panel + 16 * c * kGemmMR);
  }
}

}  // namespace sol::kernels
