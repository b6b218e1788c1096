// Portable threshold filter and k-th largest (the reference paths of kernels/select.h).
#include <algorithm>
#include <vector>

#include "kernels/select.h"

namespace sol::kernels {

int64_t collect_above_scalar(const void* x, DType t, int64_t n, float thr, int32_t base, float* val, int32_t* idx) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    if (v > thr) {
      val[count] = v;
      idx[count++] = base + int32_t(i);
    }
  }
  return count;
}

float kth_largest_scalar(const float* v, int64_t n, int64_t k) {
  std::vector<float> tmp(v, v + n);
  std::nth_element(tmp.begin(), tmp.begin() + (k - 1), tmp.end(), [](float a, float b) { return a > b; });
  return tmp[size_t(k - 1)];
}

}  // namespace sol::kernels
