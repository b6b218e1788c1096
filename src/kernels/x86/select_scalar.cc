// Portable threshold filter, k-th largest and cut (the reference paths of kernels/select.h).
#include <algorithm>
#include <vector>

#include "kernels/select.h"

namespace sol::kernels {

int64_t collect_above_scalar(const void* x, DType t, int64_t n, float thr, int32_t base, uint32_t* key, int32_t* idx) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    if (v > thr) {
      key[count] = order_key(v);
      idx[count++] = base + int32_t(i);
    }
  }
  return count;
}

KthKey kth_largest_scalar(const uint32_t* key, int64_t n, int64_t k) {
  std::vector<uint32_t> tmp(key, key + n);
  std::nth_element(tmp.begin(), tmp.begin() + (k - 1), tmp.end(), [](uint32_t a, uint32_t b) { return a > b; });
  const uint32_t kth = tmp[size_t(k - 1)];
  return {kth, std::count_if(key, key + n, [&](uint32_t x) { return x > kth; })};
}

uint32_t keep_best_scalar(uint32_t* key, int32_t* idx, int64_t n, int64_t k, uint32_t*) {
  const KthKey kth = kth_largest_scalar(key, n, k);
  int64_t ties = k - kth.above, out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (key[i] > kth.key || (key[i] == kth.key && ties-- > 0)) {
      key[out] = key[i];
      idx[out++] = idx[i];
    }
  }
  return kth.key;
}

void order_best_first_scalar(uint32_t* key, int32_t* idx, int64_t n, uint64_t* scratch) {
  // One 64-bit word per pair, larger = better: the key above, the complement of the id below.
  for (int64_t i = 0; i < n; ++i) scratch[i] = uint64_t(key[i]) << 32 | ~uint32_t(idx[i]);
  std::sort(scratch, scratch + n, [](uint64_t a, uint64_t b) { return a > b; });
  for (int64_t i = 0; i < n; ++i) key[i] = uint32_t(scratch[i] >> 32), idx[i] = int32_t(~uint32_t(scratch[i]));
}

}  // namespace sol::kernels
