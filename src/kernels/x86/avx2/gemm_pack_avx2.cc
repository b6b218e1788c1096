// The panel packers of the AVX2 GEMM: the same layouts as the AVX-512 packers (kernels/gemm.h),
// so PackedMatrix and the blocked driver are shared. A and nt B panels are transposes of rows
// of 32-bit K steps, done 4 rows x 8 steps at a time in registers (one line-sized load per row
// and step block instead of a 4-byte load per element); nn B panels interleave two rows of K.
#include <immintrin.h>

#include <cstring>

#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/x86/avx2/codes_avx2.h"

namespace sol::kernels {
namespace {

// Lines requested ahead of the steps being packed, per source row.
constexpr int64_t kAheadBytes = 256;

// 16 e4m3 bytes -> 16 bf16 (exact): the f32 of each code (codes_avx2.h) holds a bf16 value,
// so its top half is the bf16; the NaN code becomes 0x7FF0 as in src/core/convert.cc.
[[gnu::always_inline]] inline __m256i e4m3x16_to_bf16(__m128i bytes) {
  __m256 lo, hi;
  e4m3x16_to_f32(bytes, lo, hi);
  const __m256i packed = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(lo), 16),
                                             _mm256_srli_epi32(_mm256_castps_si256(hi), 16));
  return _mm256_permute4x64_epi64(packed, 0xD8);
}

// Steps [8c, 8c + valid) of a row (valid 1..8) as 32-bit lanes, the rest zero: 4-byte steps
// XORed with flip, or e4m3 pairs widened to bf16 pairs.
[[gnu::always_inline]] inline __m256i load_steps(const void* row, int64_t c, int valid, bool e4m3, __m256i flip) {
  if (e4m3) {
    const char* p = static_cast<const char*>(row) + 16 * c;
    __m128i bytes;
    if (valid == 8) {
      bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    } else {
      alignas(16) char buf[16] = {};
      std::memcpy(buf, p, size_t(2 * valid));
      bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
    }
    return e4m3x16_to_bf16(bytes);  // zero bytes widen to zero pairs
  }
  const int* p = reinterpret_cast<const int*>(static_cast<const char*>(row) + 32 * c);
  if (valid == 8) return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), flip);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_si256(_mm256_xor_si256(_mm256_maskload_epi32(p, mask), flip), mask);
}

// Rows [0, rows) of a group of 4 (null rows are zero) of `steps` 32-bit steps into
// out[s * stride + i], i = 0..3. kF32Pairs: each step's bf16 pairs as two f32 (a bf16 is the
// top half of its f32), the first values at out[2 s * stride + i], the second at
// out[(2 s + 1) * stride + i], only the `rows` real rows written (the FMA tile's A panel of m
// rows, stride m).
template <bool kF32Pairs = false>
void pack_group(const void* const* row, int rows, int64_t steps, uint32_t flip, bool e4m3, uint32_t* out,
                int64_t stride) {
  const __m128i row_mask = _mm_cmpgt_epi32(_mm_set1_epi32(rows), _mm_setr_epi32(0, 1, 2, 3));
  const __m128i high_half = _mm_set1_epi32(int(0xFFFF0000u));
  const __m256i flip8 = _mm256_set1_epi32(int(flip));
  const int64_t block = e4m3 ? 16 : 32, row_bytes = steps * (e4m3 ? 2 : 4);
  for (int64_t c = 0; 8 * c < steps; ++c) {
    if ((c * block) % 64 == 0 && c * block + kAheadBytes < row_bytes)
      for (int i = 0; i < rows; ++i) _mm_prefetch(static_cast<const char*>(row[i]) + c * block + kAheadBytes, _MM_HINT_T0);
    const int valid = int(steps - 8 * c < 8 ? steps - 8 * c : 8);
    __m256i r[4];
    for (int i = 0; i < 4; ++i) r[i] = i < rows ? load_steps(row[i], c, valid, e4m3, flip8) : _mm256_setzero_si256();
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    // u[j]: step j in the low 128 bits, step j + 4 in the high, each the 4 rows in order.
    const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    uint32_t* step = out + (kF32Pairs ? 16 : 8) * c * stride;
    for (int j = 0; j < 8 && j < valid; ++j) {
      const __m128i v = j < 4 ? _mm256_castsi256_si128(u[j]) : _mm256_extracti128_si256(u[j - 4], 1);
      if constexpr (kF32Pairs) {
        int* first = reinterpret_cast<int*>(step + 2 * j * stride);
        if (rows == 4) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(first), _mm_slli_epi32(v, 16));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(first + stride), _mm_and_si128(v, high_half));
        } else {
          _mm_maskstore_epi32(first, row_mask, _mm_slli_epi32(v, 16));
          _mm_maskstore_epi32(first + stride, row_mask, _mm_and_si128(v, high_half));
        }
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(step + j * stride), v);
      }
    }
  }
}

}  // namespace

void pack_a_panel_avx2(const void* const (&rows)[kGemmMR], int64_t steps, uint32_t flip, bool e4m3,
                       uint32_t* panel) {
  static_assert(kGemmMR % 4 == 0);
  for (int g = 0; g < kGemmMR; g += 4) pack_group(rows + g, 4, steps, flip, e4m3, panel + g, kGemmMR);
}

void pack_a_panel_f32_pairs_avx2(const void* const (&rows)[kGemmMR], int m, int64_t steps, uint32_t flip, bool e4m3,
                                 uint32_t* panel) {
  for (int g = 0; g < m; g += 4) pack_group<true>(rows + g, m - g < 4 ? m - g : 4, steps, flip, e4m3, panel + g, m);
}

void pack_b_panel_nt_avx2(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                          uint32_t* panel) {
  for (int g = 0; g < kGemmNR; g += 4) {
    const int rows = valid_cols - g < 0 ? 0 : valid_cols - g > 4 ? 4 : valid_cols - g;
    pack_group(cols + g, rows, steps, 0, e4m3, panel + g, kGemmNR);
  }
}

void pack_b_panel_nn_avx2(const void* b, int64_t ld, int valid_cols, int64_t kc, bool e4m3, uint16_t* panel) {
  const int64_t es = e4m3 ? 1 : 2, row_bytes = ld * es;
  const char* base = static_cast<const char*>(b);
  // Row k's 32 columns as bf16 (columns from valid_cols on zero), in two 16-column halves.
  const auto row = [&](int64_t k, __m256i (&half)[2]) {
    const char* r = base + k * row_bytes;
    alignas(32) char buf[64] = {};
    if (valid_cols < 32) {
      std::memcpy(buf, r, size_t(valid_cols * es));
      r = buf;
    }
    if (e4m3) {
      half[0] = e4m3x16_to_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
      half[1] = e4m3x16_to_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 16)));
    } else {
      half[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r));
      half[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 32));
    }
  };
  for (int64_t k = 0; k < kc; k += 2) {
    if (k + 8 < kc) {
      _mm_prefetch(base + (k + 8) * row_bytes, _MM_HINT_T0);
      _mm_prefetch(base + (k + 9) * row_bytes, _MM_HINT_T0);
    }
    __m256i r0[2], r1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    row(k, r0);
    if (k + 1 < kc) row(k + 1, r1);
    __m256i* out = reinterpret_cast<__m256i*>(panel + k * kGemmNR);
    for (int h = 0; h < 2; ++h) {
      // Within each 128-bit lane: columns 0-3 (lo) and 4-7 (hi) of the lane's 8, as pairs.
      const __m256i lo = _mm256_unpacklo_epi16(r0[h], r1[h]), hi = _mm256_unpackhi_epi16(r0[h], r1[h]);
      _mm256_storeu_si256(out + 2 * h, _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(out + 2 * h + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
}

void widen_e4m3_avx2(const void* src, uint16_t* dst, int64_t n) {
  convert_avx2(src, DType::f8e4m3, dst, DType::bf16, n, false, 0);
}

}  // namespace sol::kernels
