// AVX-512 weighted row sum: all k rows are read in one sweep over the columns, each 16-column
// block accumulated in a register, so no f32 copy of a row or of the sum is ever stored. The k
// rows are scattered in memory (one per chosen expert), k streams the hardware prefetcher
// tracks poorly: each is prefetched ahead by software.
#include "kernels/combine.h"
#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {

namespace {

// The sweep with the live rows (non-null) known at compile time in number: the row loop is
// unrolled and the row pointers and weights stay in registers.
template <DType In, int N>
void weighted_sum_fixed(const void* const* rows, const float* w, void* out, DType ot, int64_t h, bool stream) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  const void* r[N];
  __m512 wv[N];
  for (int q = 0; q < N; ++q) r[q] = rows[q], wv[q] = _mm512_set1_ps(w[q]);
  write_row(out, ot, h, stream, [&](int64_t i, __mmask16 m) {
    __m512 acc = _mm512_setzero_ps();
    for (int q = 0; q < N; ++q) {
      prefetch_ahead(r[q], i * es);
      acc = _mm512_fmadd_ps(wv[q], load16(r[q], In, i, m), acc);
    }
    return acc;
  });
}

template <DType In>
void weighted_sum_any(const void* const* rows, const float* w, int64_t k, void* out, DType ot, int64_t h,
                      bool stream) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  write_row(out, ot, h, stream, [&](int64_t i, __mmask16 m) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < k; ++j) {
      if (!rows[j]) continue;
      prefetch_ahead(rows[j], i * es);
      acc = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(rows[j], In, i, m), acc);
    }
    return acc;
  });
}

template <DType In>
void weighted_sum(const void* const* rows, const float* w, int64_t k, void* out, DType ot, int64_t h, bool stream) {
  constexpr int kMaxFixed = 8;
  if (k > 2 * kMaxFixed) return weighted_sum_any<In>(rows, w, k, out, ot, h, stream);
  // The live rows in order, so that the fixed sweeps skip no terms and reorder none.
  const void* live[2 * kMaxFixed];
  float lw[2 * kMaxFixed];
  int n = 0;
  for (int64_t j = 0; j < k; ++j)
    if (rows[j]) live[n] = rows[j], lw[n++] = w[j];
  switch (n) {
    case 1: return weighted_sum_fixed<In, 1>(live, lw, out, ot, h, stream);
    case 2: return weighted_sum_fixed<In, 2>(live, lw, out, ot, h, stream);
    case 3: return weighted_sum_fixed<In, 3>(live, lw, out, ot, h, stream);
    case 4: return weighted_sum_fixed<In, 4>(live, lw, out, ot, h, stream);
    case 5: return weighted_sum_fixed<In, 5>(live, lw, out, ot, h, stream);
    case 6: return weighted_sum_fixed<In, 6>(live, lw, out, ot, h, stream);
    case 7: return weighted_sum_fixed<In, 7>(live, lw, out, ot, h, stream);
    case 8: return weighted_sum_fixed<In, 8>(live, lw, out, ot, h, stream);
    default: return weighted_sum_any<In>(live, lw, n, out, ot, h, stream);
  }
}

}  // namespace

void weighted_row_sum_avx512(const void* const* rows, const float* w, int64_t k, DType t, void* out, DType ot,
                             int64_t h, bool stream) {
  if (t == DType::bf16) weighted_sum<DType::bf16>(rows, w, k, out, ot, h, stream);
  else weighted_sum<DType::f32>(rows, w, k, out, ot, h, stream);
}

}  // namespace sol::kernels
