// The panel packers of the AVX-512 GEMM. A: kGemmMR rows of 32-bit K steps (f32, bf16 pairs,
// int8 quads, or e4m3 pairs widened to bf16 pairs) into the micro-kernel's K-major panel,
// panel[s * kGemmMR + i] = row i, step s. A transpose, done 16 steps at a time in registers:
// 12 row vectors in, 48 lane stores out.
//
// Why it is a kernel and not plain C++: the plain loop moves one 32-bit step per row per
// iteration, so a cold A row (a different page for each of the 12 rows) is asked for one
// line at a time and every 16 steps wait for DRAM — 176 round trips for a 256 x 256 bf16
// block, 18 us of a 100 us 256^3 GEMM (docs/perf/gemm.md). Here each row is read a
// whole line per load and the lines `kAheadChunks` chunks ahead are requested while this
// chunk is transposed. B panels from a plain B use the same transpose (nt: 32 rows of [N, K])
// or pair interleaving (nn: two rows of [K, N]); their scalar loops ran at ~4 cycles per
// element, 6.6 of 15.9 ms of a 512 x 4096 x 1024 bf16 GEMM with a plain nn B.
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

// Steps 4Q..4Q+3 (of `valid`) of a transposed chunk of R rows: lane Q of u[4g + j] holds rows
// 4g..4g+3 of step 4Q + j. Step s goes to out + s * stride; with kF32Pairs only the first
// `rows` rows go out, each bf16 pair as two f32: the first values at out + s * stride, the
// second `rows` words after them.
template <int R, int Q, bool kF32Pairs>
[[gnu::always_inline]] inline void store_lane(const __m512i (&u)[R], int valid, uint32_t* out, int64_t stride,
                                              int rows) {
  for (int j = 0; j < 4; ++j) {
    if (4 * Q + j >= valid) return;
    uint32_t* step = out + (4 * Q + j) * stride;
    for (int g = 0; g < R / 4; ++g) {
      const __m128i w = _mm512_extracti32x4_epi32(u[4 * g + j], Q);
      if constexpr (kF32Pairs) {
        if (4 * g >= rows) break;
        const __mmask8 live = __mmask8(rows - 4 * g >= 4 ? 0xF : (1u << (rows - 4 * g)) - 1);
        _mm_mask_storeu_epi32(step + 4 * g, live, _mm_slli_epi32(w, 16));
        _mm_mask_storeu_epi32(step + rows + 4 * g, live, _mm_and_si128(w, _mm_set1_epi32(int(0xFFFF0000u))));
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(step + 4 * g), w);
      }
    }
  }
}

// R rows x 16 steps (32-bit each) -> 16 steps x R rows.
template <int R, bool kF32Pairs>
[[gnu::always_inline]] inline void transpose_store(const __m512i (&r)[R], int valid, uint32_t* out, int64_t stride,
                                                   int rows) {
  __m512i u[R];
  for (int g = 0; g < R / 4; ++g) {  // rows 4g..4g+3
    const __m512i t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
    const __m512i t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2);  // per lane: step 4q + 0 of the 4 rows
    u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  store_lane<R, 0, kF32Pairs>(u, valid, out, stride, rows);
  store_lane<R, 1, kF32Pairs>(u, valid, out, stride, rows);
  store_lane<R, 2, kF32Pairs>(u, valid, out, stride, rows);
  store_lane<R, 3, kF32Pairs>(u, valid, out, stride, rows);
}

// R rows (the first `rows` real, the rest zero) of `steps` 32-bit steps into out[s * stride + i]
// (kF32Pairs: the first `rows` rows as f32 pairs, store_lane).
template <int R, bool kF32Pairs = false>
void pack_rows(const void* const* row, int rows, int64_t steps, uint32_t flip, bool e4m3, uint32_t* out,
               int64_t stride) {
  const __m512i flip16 = _mm512_set1_epi32(int(flip));
  const int64_t chunks = (steps + 15) / 16, line = chunk_bytes(e4m3);
  for (int64_t c = 0; c < chunks; ++c) {
    if (c + kAheadChunks < chunks)
      for (int i = 0; i < rows; ++i)
        _mm_prefetch(static_cast<const char*>(row[i]) + (c + kAheadChunks) * line, _MM_HINT_T0);
    const int valid = int(steps - 16 * c < 16 ? steps - 16 * c : 16);
    __m512i r[R];
    for (int i = 0; i < R; ++i) r[i] = i < rows ? load_steps(row[i], c, valid, e4m3, flip16) : _mm512_setzero_si512();
    transpose_store<R, kF32Pairs>(r, valid, out + 16 * c * stride, stride, rows);
  }
}

}  // namespace

void pack_a_panel_avx512(const void* const (&rows)[kGemmMR], int64_t steps, uint32_t flip, bool e4m3,
                         uint32_t* panel) {
  pack_rows<kGemmMR>(rows, kGemmMR, steps, flip, e4m3, panel, kGemmMR);
}

void pack_a_panel_f32_pairs_avx512(const void* const (&rows)[kGemmMR], int m, int64_t steps, uint32_t flip,
                                   bool e4m3, uint32_t* panel) {
  pack_rows<kGemmMR, true>(rows, m, steps, flip, e4m3, panel, 2 * m);
}

void pack_b_panel_nt_avx512(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                            uint32_t* panel) {
  static_assert(kGemmNR == 32);
  for (int half = 0; half < 2; ++half) {
    const int rows = valid_cols - 16 * half < 0 ? 0 : valid_cols - 16 * half > 16 ? 16 : valid_cols - 16 * half;
    pack_rows<16>(cols + 16 * half, rows, steps, 0, e4m3, panel + 16 * half, kGemmNR);
  }
}

void pack_b_panel_nn_avx512(const void* b, int64_t ld, int valid_cols, int64_t kc, bool e4m3, uint16_t* panel) {
  // Output step p: columns c = 0..31 as (row 2p, row 2p + 1) pairs; vpermt2w picks them from
  // the two rows' 32-column vectors (e4m3 rows widened first, exactly).
  alignas(64) static const uint16_t kLo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                               8,  40, 9,  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const uint16_t kHi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                               24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_load_si512(kLo), hi = _mm512_load_si512(kHi);
  const __mmask32 mask = valid_cols >= 32 ? __mmask32(0xFFFFFFFF) : __mmask32((1u << valid_cols) - 1);
  const int64_t row_bytes = ld * (e4m3 ? 1 : 2);
  const char* base = static_cast<const char*>(b);
  const auto row = [&](int64_t k) {
    const char* r = base + k * row_bytes;
    return e4m3 ? _mm512_maskz_mov_epi16(mask, e4m3x32_to_bf16(_mm256_maskz_loadu_epi8(mask, r)))
                : _mm512_maskz_loadu_epi16(mask, r);
  };
  for (int64_t k = 0; k < kc; k += 2) {
    if (k + 8 < kc) {
      _mm_prefetch(base + (k + 8) * row_bytes, _MM_HINT_T0);
      _mm_prefetch(base + (k + 9) * row_bytes, _MM_HINT_T0);
    }
    const __m512i r0 = row(k);
    const __m512i r1 = k + 1 < kc ? row(k + 1) : _mm512_setzero_si512();
    _mm512_storeu_si512(panel + k * kGemmNR, _mm512_permutex2var_epi16(r0, lo, r1));
    _mm512_storeu_si512(panel + k * kGemmNR + 32, _mm512_permutex2var_epi16(r0, hi, r1));
  }
}

}  // namespace sol::kernels
