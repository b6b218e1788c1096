#pragma once
// Register sub-tiles of the AVX2 tile kernels (GEMM, flash attention, MLA decode): 16 ymm
// registers hold far fewer sums than AVX-512's 32 zmm, so a tile is computed as sub-tiles. Their
// accumulator type, the lane masks of a ragged column edge and the balanced sub-tile heights.
// Include only from *_avx2 files; everything is in an anonymous namespace.
#include <immintrin.h>

namespace sol::kernels {
namespace {

// Accumulators as a plain vector type: __m256 is declared may_alias, and GCC 12 then stores an
// array of them to the stack after every FMA (the AVX-512 int8 kernel met the same).
typedef float AccF32 __attribute__((vector_size(32)));

// Lane mask of the first `valid` (0..8) 32-bit lanes, for vmaskmov.
inline __m256i lane_mask(int valid) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lanes);
}

// Valid columns (0..8) of the 8-column vector v (0..3) of a tile with n valid columns.
inline int vector_cols(int n, int v) {
  const int left = n - 8 * v;
  return left <= 0 ? 0 : left >= 8 ? 8 : left;
}

// Rows of a tile's sub-tiles: as few sub-tiles as k_rows allows, their heights as even as can
// be (8 rows as 4 + 4, not 6 + 2: a short sub-tile loads and widens each B vector for few
// FMAs). Each element's sum is the same whatever the split.
inline int balanced_rows(int m, int k_rows) {
  const int blocks = (m + k_rows - 1) / k_rows;
  return (m + blocks - 1) / blocks;
}

}  // namespace
}  // namespace sol::kernels
