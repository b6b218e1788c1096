#pragma once
// Cheaper 16-lane steps for the row kernels of activations, softmax and rope (on top of
// vec16_avx512.h). Include only from *_avx512.cc files; anonymous namespace, as vec16.
#include <algorithm>
#include <cstdint>

#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {

// f32 -> bf16 with vcvtneps2bf16: one instruction for round-to-nearest-even and for NaN
// (quiet bit set, as sol::f32_to_bf16), but it reads subnormal inputs as zero (Zen 5, and the
// ISA allows it). One vfpclassps finds those lanes; the rare vector holding one takes the
// integer rounding of vec16 instead. The result equals sol::f32_to_bf16 lane for lane.
[[gnu::always_inline]] inline __m256i to_bf16_fast(__m512 v) {
  if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0x20) != 0, 0)) return to_bf16(v);  // 0x20: denormal
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
}

[[gnu::always_inline]] inline void store16_fast(void* p, DType t, int64_t i, __mmask16 m, __m512 v) {
  if (t == DType::bf16) _mm256_mask_storeu_epi16(static_cast<uint16_t*>(p) + i, m, to_bf16_fast(v));
  else _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
}

// exp16 (vec16_avx512.h) for x <= 0 or NaN, as softmax's x - max: the upper clamp is not
// needed, the lower one still is (-inf must not meet inf - inf). Same bits as exp16 there.
[[gnu::always_inline]] inline __m512 exp16_nonpositive(__m512 x) {
  return exp16_clamped(_mm512_max_ps(_mm512_set1_ps(-104.0f), x));
}

// Software prefetch of the cache line `ahead` bytes past p + offset (ahead: the tuning's
// row_prefetch_bytes, read once per call). The row kernels stream two or three arrays at once
// and do enough work per line that the hardware prefetcher falls behind; a line may lie past
// the row's end (prefetches never fault).
[[gnu::always_inline]] inline void prefetch_ahead(const void* p, int64_t offset, int64_t ahead) {
  __builtin_prefetch(static_cast<const char*>(p) + offset + ahead);
}

// Writes the row y[0..n) (f32 or bf16) from f(i, m), the f32 results of elements i.. i+15 in
// lanes m (i need not be a multiple of 16). With stream, every whole 64-byte line of y is
// written by one non-temporal store: no read-for-ownership of lines that are overwritten
// whole, which is a third of the DRAM traffic of a bf16 row op; the partial lines at both
// ends take ordinary masked stores.
template <class F>
[[gnu::always_inline]] inline void write_row(void* y, DType yt, int64_t n, bool stream, F&& f) {
  const int64_t es = int64_t(dtype_size(yt));
  const auto addr = reinterpret_cast<uintptr_t>(y);
  int64_t i = 0;
  if (stream && addr % uintptr_t(es) == 0) {
    const int64_t head = std::min<int64_t>(n, int64_t((64 - (addr & 63)) & 63) / es), per_line = 64 / es;
    for (int64_t h = 0; h < head; h += 16) {
      const __mmask16 m = tail_mask(head - h);
      store16_fast(y, yt, h, m, f(h, m));
    }
    i = head;
    for (; i + per_line <= n; i += per_line) {
      __m512i line;
      if (yt == DType::bf16)
        line = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16_fast(f(i, __mmask16(0xFFFF)))),
                                  to_bf16_fast(f(i + 16, __mmask16(0xFFFF))), 1);
      else
        line = _mm512_castps_si512(f(i, __mmask16(0xFFFF)));
      _mm512_stream_si512(reinterpret_cast<__m512i*>(static_cast<char*>(y) + i * es), line);
    }
    _mm_sfence();
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    store16_fast(y, yt, i, m, f(i, m));
  }
}

}  // namespace
}  // namespace sol::kernels
