// Dispatch and the portable reduction path.
#include "comm/reduce.h"

#include <algorithm>

#include "sol/hw.h"

namespace sol::comm::detail {

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

bool reducible(DType t) { return t == DType::f32 || t == DType::bf16; }

void reduce_sources_portable(void* dst, const void* const* sources, int count_sources,
                             int64_t elements, DType dtype, ReduceOp op) {
  if (dtype == DType::f32) {
    auto* out = static_cast<float*>(dst);
    reduce_portable(count_sources, elements, op,
                    [&](int s, int64_t i) { return static_cast<const float*>(sources[s])[i]; },
                    [&](int64_t i, float v) { out[i] = v; });
  } else {
    auto* out = static_cast<uint16_t*>(dst);
    reduce_portable(
        count_sources, elements, op,
        [&](int s, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(sources[s])[i]); },
        [&](int64_t i, float v) { out[i] = f32_to_bf16(v); });
  }
}

void reduce_sources_to_portable(void* const* dsts, int count_dsts, const void* const* sources,
                                int count_sources, int64_t elements, DType dtype, ReduceOp op) {
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

void reduce_sources_to(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                       int64_t elements, DType dtype, ReduceOp op, bool stream) {
  if (elements <= 0 || count_sources <= 0 || count_dsts <= 0) return;
  static const bool vector_path = isa_at_least(Isa::avx512);
  if (vector_path) reduce_sources_to_avx512(dsts, count_dsts, sources, count_sources, elements, dtype, op, stream);
  else reduce_sources_to_portable(dsts, count_dsts, sources, count_sources, elements, dtype, op);
}

void reduce_sources(void* dst, const void* const* sources, int count_sources, int64_t elements,
                    DType dtype, ReduceOp op, bool stream) {
  if (elements <= 0 || count_sources <= 0) return;
  // Decided once: reading SOL_ISA on every call would cost more than an 8-byte reduction.
  static const bool vector_path = isa_at_least(Isa::avx512);
  if (vector_path) reduce_sources_avx512(dst, sources, count_sources, elements, dtype, op, stream);
  else reduce_sources_portable(dst, sources, count_sources, elements, dtype, op);
}

}  // namespace sol::comm::detail
