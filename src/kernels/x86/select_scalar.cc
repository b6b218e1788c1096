// Portable threshold filter (the reference path of kernels/select.h).
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

}  // namespace sol::kernels
