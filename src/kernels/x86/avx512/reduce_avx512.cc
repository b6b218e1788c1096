// AVX-512 reductions: 16 elements per step, masked tails, f32 accumulation for bf16 with
// round-to-nearest-even on the way out (vcvtneps2bf16: the rounding of f32_to_bf16 for normal
// numbers; it flushes subnormal bf16 results to zero, which the portable path does not).
// Every rank of a collective runs the same path, so ranks still agree bit for bit.

// GCC 12's own _mm512_undefined_* helpers trip -Wuninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/reduce.h"

namespace sol::kernels {

namespace {

// Everything stays in this anonymous namespace: an inline function shared with baseline
// translation units could be merged by the linker into this AVX-512 build of it.

template <DType T>
[[gnu::always_inline]] inline __m512 load16(const void* p, int64_t i, __mmask16 m) {
  if constexpr (T == DType::f32) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
  __m256i bits = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

template <DType T, bool Stream>
[[gnu::always_inline]] inline void store16(void* p, int64_t i, __mmask16 m, __m512 v) {
  if constexpr (T == DType::f32) {
    if (Stream && m == 0xFFFF) _mm512_stream_ps(static_cast<float*>(p) + i, v);
    else _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
  } else {
    __m256i bits = (__m256i)_mm512_cvtneps_pbh(v);
    if (Stream && m == 0xFFFF) _mm256_stream_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(p) + i), bits);
    else _mm256_mask_storeu_epi16(static_cast<uint16_t*>(p) + i, m, bits);
  }
}

template <ReduceOp Op>
[[gnu::always_inline]] inline __m512 combine(__m512 a, __m512 b) {
  return Op == ReduceOp::sum ? _mm512_add_ps(a, b) : _mm512_max_ps(a, b);
}

// Four vectors (64 elements, one to four cache lines per source) in flight per step: one
// vector at a time leaves the load ports waiting on each source's latency in turn. Every result
// goes to each of the `nd` destinations (an allreduce pushes its part into every rank's output).
template <DType T, ReduceOp Op, bool Stream>
void reduce_loop(void* const* dsts, int nd, const void* const* sources, int n, int64_t elements) {
  constexpr __mmask16 all = 0xFFFF;
  int64_t i = 0;
  for (; i + 64 <= elements; i += 64) {
    __m512 a0 = load16<T>(sources[0], i, all), a1 = load16<T>(sources[0], i + 16, all);
    __m512 a2 = load16<T>(sources[0], i + 32, all), a3 = load16<T>(sources[0], i + 48, all);
    for (int s = 1; s < n; ++s) {
      a0 = combine<Op>(a0, load16<T>(sources[s], i, all));
      a1 = combine<Op>(a1, load16<T>(sources[s], i + 16, all));
      a2 = combine<Op>(a2, load16<T>(sources[s], i + 32, all));
      a3 = combine<Op>(a3, load16<T>(sources[s], i + 48, all));
    }
    for (int d = 0; d < nd; ++d) {
      store16<T, Stream>(dsts[d], i, all, a0);
      store16<T, Stream>(dsts[d], i + 16, all, a1);
      store16<T, Stream>(dsts[d], i + 32, all, a2);
      store16<T, Stream>(dsts[d], i + 48, all, a3);
    }
  }
  for (; i < elements; i += 16) {
    const int64_t left = elements - i;
    const __mmask16 m = left >= 16 ? all : __mmask16((1u << left) - 1);
    __m512 acc = load16<T>(sources[0], i, m);
    for (int s = 1; s < n; ++s) acc = combine<Op>(acc, load16<T>(sources[s], i, m));
    for (int d = 0; d < nd; ++d) store16<T, Stream>(dsts[d], i, m, acc);
  }
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

void reduce_sources_to_avx512(void* const* dsts, int count_dsts, const void* const* sources,
                              int count_sources, int64_t elements, DType dtype, ReduceOp op, bool stream) {
  // Streaming stores need aligned vectors: 64 bytes (f32) or 32 bytes (bf16).
  const uintptr_t align = dtype == DType::f32 ? 63 : 31;
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
