#pragma once
// Top-k selection over long rows (internal, per ISA): the one pass over a vocabulary-sized row
// that finds the few candidates worth sorting, and the cut that keeps the best k of them.
//
// Candidates are held as order keys: a float's bits mapped to an unsigned integer that grows
// with the float's value (-0 below +0), so the cut compares integers. No NaN is ever stored.
#include <cstdint>
#include <cstring>

#include "core/kernel_table.h"
#include "sol/dtype.h"

namespace sol::kernels {

inline uint32_t order_key(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b & 0x80000000u ? ~b : b | 0x80000000u;  // negative: all bits flipped; else the sign set
}

inline float key_value(uint32_t key) {
  const uint32_t b = key & 0x80000000u ? key ^ 0x80000000u : ~key;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Slack past the last candidate that the buffers need (whole vectors are stored and read).
inline constexpr int64_t kSelectSlack = 64;

// Appends every i in [0, n) with x[i] > thr (x f32 or bf16, compared as f32; NaN never passes)
// as key[count..] = order_key(x[i]), idx[count..] = base + i, in increasing i; returns the
// number appended. key and idx need room for the matches plus kSelectSlack. The AVX-512 version
// also requests the memory 16 KiB past what it reads (software prefetch): the pass streams a
// row from DRAM, and rows follow each other, so it requests the next row's start as well.
int64_t collect_above_scalar(const void* x, DType t, int64_t n, float thr, int32_t base, uint32_t* key, int32_t* idx);
int64_t collect_above_avx512(const void* x, DType t, int64_t n, float thr, int32_t base, uint32_t* key, int32_t* idx);

// The k-th largest of key[0..n) (1 <= k <= n) and how many keys are strictly larger.
struct KthKey {
  uint32_t key;
  int64_t above;
};
// Scalar: nth_element (branches on data). AVX-512: quickselect with vcompressps partitions
// (keys above / below a median-of-three pivot; equal keys end the search), finished by ranks
// once 16 keys are left; scratch needs 4 * (n + kSelectSlack) entries. The bitwise version
// builds the answer bit by bit (32 branch-free counting passes): the quickselect falls back to
// it when its pivots keep splitting badly, so a hostile row costs O(32 n), never O(n^2).
KthKey kth_largest_scalar(const uint32_t* key, int64_t n, int64_t k);
KthKey kth_largest_avx512(const uint32_t* key, int64_t n, int64_t k, uint32_t* scratch);
KthKey kth_largest_bitwise_avx512(const uint32_t* key, int64_t n, int64_t k);

// Keeps the best k of the n (key, idx) pairs, which are in increasing idx, by (key larger, idx
// lower), in place and still in increasing idx; returns the k-th best key (1 <= k <= n).
// scratch as for kth_largest_avx512.
uint32_t keep_best_scalar(uint32_t* key, int32_t* idx, int64_t n, int64_t k, uint32_t* scratch);
uint32_t keep_best_avx512(uint32_t* key, int32_t* idx, int64_t n, int64_t k, uint32_t* scratch);

// Orders the n (key, idx) pairs best first: key larger, then idx lower (ids distinct), in place.
// scratch: n + kSelectSlack entries. The AVX-512 version ranks every pair against every other
// (n^2 / 8 compares, no data-dependent branch) up to kRankSortMax pairs, and sorts beyond.
inline constexpr int64_t kRankSortMax = 128;
void order_best_first_scalar(uint32_t* key, int32_t* idx, int64_t n, uint64_t* scratch);
void order_best_first_avx512(uint32_t* key, int32_t* idx, int64_t n, uint64_t* scratch);

// The sampler's selection kernels at one ISA level.
struct SelectKernels {
  decltype(&collect_above_scalar) collect_above;
  decltype(&keep_best_scalar) keep_best;
  decltype(&order_best_first_scalar) order_best_first;
};
KernelTable<SelectKernels> select_kernel_table();

}  // namespace sol::kernels
