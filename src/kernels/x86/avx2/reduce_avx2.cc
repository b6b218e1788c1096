// AVX2 reductions: 8 elements a vector, four vectors in flight per step, the tail through a
// zero-padded copy. The same arithmetic as the portable path in the same order (a sum source
// by source; a maximum as std::max(acc, v), which keeps acc when either is NaN; bf16 rounded as
// f32_to_bf16), so this level gives the portable bits, subnormals included; where both give a
// NaN, which NaN's payload a sum carries is the compiler's choice on the portable path.

#include <immintrin.h>

#include <cstring>

#include "kernels/reduce.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

template <DType T>
[[gnu::always_inline]] inline __m256 load8(const void* p, int64_t i) {
  if constexpr (T == DType::f32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  return widen8_bf16(static_cast<const uint16_t*>(p) + i);
}

template <DType T, bool Stream>
[[gnu::always_inline]] inline void store8(void* p, int64_t i, __m256 v) {
  if constexpr (T == DType::f32) {
    float* out = static_cast<float*>(p) + i;
    if constexpr (Stream) _mm256_stream_ps(out, v);
    else _mm256_storeu_ps(out, v);
  } else {
    const __m128i packed = narrow8_bf16(v);
    __m128i* out = reinterpret_cast<__m128i*>(static_cast<uint16_t*>(p) + i);
    if constexpr (Stream) _mm_stream_si128(out, packed);
    else _mm_storeu_si128(out, packed);
  }
}

template <ReduceOp Op>
[[gnu::always_inline]] inline __m256 combine(__m256 acc, __m256 v) {
  if constexpr (Op == ReduceOp::sum) return _mm256_add_ps(acc, v);
  return _mm256_blendv_ps(acc, v, _mm256_cmp_ps(acc, v, _CMP_LT_OQ));
}

template <DType T, ReduceOp Op, bool Stream>
[[gnu::always_inline]] inline void step8(void* const* dsts, int nd, const void* const* sources, int n, int64_t i) {
  __m256 acc = load8<T>(sources[0], i);
  for (int s = 1; s < n; ++s) acc = combine<Op>(acc, load8<T>(sources[s], i));
  for (int d = 0; d < nd; ++d) store8<T, Stream>(dsts[d], i, acc);
}

// Every result goes to each of the `nd` destinations (an allreduce pushes its part into every
// rank's output); four vectors a step keep several loads of each source in flight.
template <DType T, ReduceOp Op, bool Stream>
void reduce_loop(void* const* dsts, int nd, const void* const* sources, int n, int64_t elements) {
  int64_t i = 0;
  for (; i + 32 <= elements; i += 32) {
    __m256 a0 = load8<T>(sources[0], i), a1 = load8<T>(sources[0], i + 8);
    __m256 a2 = load8<T>(sources[0], i + 16), a3 = load8<T>(sources[0], i + 24);
    for (int s = 1; s < n; ++s) {
      a0 = combine<Op>(a0, load8<T>(sources[s], i));
      a1 = combine<Op>(a1, load8<T>(sources[s], i + 8));
      a2 = combine<Op>(a2, load8<T>(sources[s], i + 16));
      a3 = combine<Op>(a3, load8<T>(sources[s], i + 24));
    }
    for (int d = 0; d < nd; ++d) {
      store8<T, Stream>(dsts[d], i, a0);
      store8<T, Stream>(dsts[d], i + 8, a1);
      store8<T, Stream>(dsts[d], i + 16, a2);
      store8<T, Stream>(dsts[d], i + 24, a3);
    }
  }
  for (; i + 8 <= elements; i += 8) step8<T, Op, Stream>(dsts, nd, sources, n, i);
  if (i == elements) return;
  // The last 1-7 elements: each source copied into a padded vector, the result copied out.
  constexpr size_t size = T == DType::f32 ? 4 : 2;
  const size_t bytes = size_t(elements - i) * size;
  alignas(32) unsigned char in[8 * 4];
  alignas(32) unsigned char out[8 * 4];
  std::memset(in, 0, sizeof in);
  std::memcpy(in, static_cast<const unsigned char*>(sources[0]) + size_t(i) * size, bytes);
  __m256 acc = load8<T>(in, 0);
  for (int s = 1; s < n; ++s) {
    std::memcpy(in, static_cast<const unsigned char*>(sources[s]) + size_t(i) * size, bytes);
    acc = combine<Op>(acc, load8<T>(in, 0));
  }
  store8<T, false>(out, 0, acc);
  for (int d = 0; d < nd; ++d) std::memcpy(static_cast<unsigned char*>(dsts[d]) + size_t(i) * size, out, bytes);
}

template <DType T, ReduceOp Op>
void reduce_dispatch(void* const* dsts, int nd, const void* const* sources, int n, int64_t elements, bool stream) {
  if (!stream) {
    reduce_loop<T, Op, false>(dsts, nd, sources, n, elements);
    return;
  }
  reduce_loop<T, Op, true>(dsts, nd, sources, n, elements);
  _mm_sfence();  // non-temporal stores are not ordered by a later release store
}

}  // namespace

void reduce_sources_to_avx2(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                            int64_t elements, DType dtype, ReduceOp op, bool stream) {
  // Streaming stores need aligned vectors: 32 bytes (f32) or 16 bytes (bf16).
  const uintptr_t align = dtype == DType::f32 ? 31 : 15;
  for (int d = 0; d < count_dsts; ++d) stream = stream && (reinterpret_cast<uintptr_t>(dsts[d]) & align) == 0;
  const bool sum = op == ReduceOp::sum;
  const int nd = count_dsts, n = count_sources;
  if (dtype == DType::f32) {
    if (sum) reduce_dispatch<DType::f32, ReduceOp::sum>(dsts, nd, sources, n, elements, stream);
    else reduce_dispatch<DType::f32, ReduceOp::max>(dsts, nd, sources, n, elements, stream);
  } else {
    if (sum) reduce_dispatch<DType::bf16, ReduceOp::sum>(dsts, nd, sources, n, elements, stream);
    else reduce_dispatch<DType::bf16, ReduceOp::max>(dsts, nd, sources, n, elements, stream);
  }
}

}  // namespace sol::kernels
