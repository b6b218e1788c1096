// The portable reduction: one element at a time, f32 accumulation in source order.
#include <algorithm>

#include "kernels/reduce.h"

namespace sol::kernels {

namespace {

template <class Load, class Store>
void reduce_portable(int count_sources, int64_t elements, ReduceOp op, Load&& load, Store&& store) {
  for (int64_t i = 0; i < elements; ++i) {
    float acc = load(0, i);
    for (int s = 1; s < count_sources; ++s) {
      float v = load(s, i);
      acc = op == ReduceOp::sum ? acc + v : std::max(acc, v);
    }
    store(i, acc);
  }
}

}  // namespace

void reduce_sources_to_portable(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                                int64_t elements, DType dtype, ReduceOp op, bool) {
  if (dtype == DType::f32) {
    reduce_portable(count_sources, elements, op,
                    [&](int s, int64_t i) { return static_cast<const float*>(sources[s])[i]; },
                    [&](int64_t i, float v) {
                      for (int d = 0; d < count_dsts; ++d) static_cast<float*>(dsts[d])[i] = v;
                    });
  } else {
    reduce_portable(
        count_sources, elements, op,
        [&](int s, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(sources[s])[i]); },
        [&](int64_t i, float v) {
          for (int d = 0; d < count_dsts; ++d) static_cast<uint16_t*>(dsts[d])[i] = f32_to_bf16(v);
        });
  }
}

}  // namespace sol::kernels
