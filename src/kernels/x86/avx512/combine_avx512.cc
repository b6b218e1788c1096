// AVX-512 weighted row sum: all k rows are read in one sweep over the columns, each 32-column
// step accumulated in registers, so no f32 copy of a row or of the sum is ever stored. The k
// rows are scattered in memory (one per chosen expert), k streams the hardware prefetcher
// tracks poorly: each is prefetched ahead by software, one line per row per step.
//
// On one core the time of this sweep is close to the time its scattered reads take alone plus
// the time its instructions take alone (docs/perf/layer-ops.md): the two overlap
// little. So the instructions per line of each row are what is cut here, without changing which
// lines are asked for when: bf16 lines are widened even/odd (one shift, one and; pair_avx512.h),
// and for up to kMaxUnrolled live rows the row loop is unrolled with the row pointers and
// weights in registers (no per-row loop counter, null test or weight broadcast). A line of a
// bf16 row costs 5 instructions (prefetch, shift and and from memory, two FMAs) instead of ~20.
// Row-at-a-time sums into an f32 row, two rows at a time, longer or exact-line prefetch
// distances and prefetching into L2 were all slower (the distance is the tuning's
// row_prefetch_bytes). Near a row's end the look-ahead runs on into the next token's row of
// the same slot (the caller passes them), so a token's rows do not start on cold lines.
#include "kernels/combine.h"

#include <algorithm>
#include <vector>

#include "kernels/x86/avx512/pair_avx512.h"

namespace sol::kernels {

namespace {

constexpr int kMaxUnrolled = 8;  // DeepSeek-V3 routes each token to 8 experts

// out = sum over the rows in order of w[q] * r[q], one fused multiply-add per term from +0.
// N > 0: exactly N rows, none null (the loop unrolls). N == 0: n rows, null ones skipped.
// next[q] (any may be null): the row whose first lines row q's look-ahead requests once it
// passes the end of row q.
template <DType In, DType Out, int N>
void weighted_sum(const void* const* rows, const float* w, int64_t n, const void* const* next, void* out, int64_t h,
                  bool stream, int64_t ahead) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  const int64_t count = N > 0 ? N : n;
  // Local copies (N > 0), which the compiler keeps in registers: the output stores could alias
  // the caller's arrays as far as it knows.
  const void* local[N > 0 ? N : 1];
  __m512 wv[N > 0 ? N : 1];
  if constexpr (N > 0)
    for (int q = 0; q < N; ++q) local[q] = rows[q], wv[q] = _mm512_set1_ps(w[q]);
  const void* const* r = N > 0 ? local : rows;
  // Where a row's look-ahead lands past its end: base + i * es + ahead is offset
  // i * es + ahead - h * es into the next row (or past this row's end when there is none).
  const int64_t row_bytes = h * es;
  auto past_end_base = [&](int64_t q) {
    const void* to = next[q] ? next[q] : r[q];
    return reinterpret_cast<uintptr_t>(to) - (next[q] ? uintptr_t(row_bytes) : 0);
  };
  uintptr_t tail_base[N > 0 ? N : 1];
  if constexpr (N > 0)
    for (int q = 0; q < N; ++q) tail_base[q] = past_end_base(q);
  auto weight = [&](int64_t q) {
    if constexpr (N > 0) return wv[q];
    else return _mm512_set1_ps(w[q]);
  };
  // 32 elements at i: one line of a bf16 row, two of an f32 row.
  auto step = [&](int64_t i) {
    Pair acc{_mm512_setzero_ps(), _mm512_setzero_ps()};
    const bool past_end = i * es + ahead >= row_bytes;
    for (int64_t q = 0; q < count; ++q) {
      if (N == 0 && !r[q]) continue;
      const char* row = static_cast<const char*>(r[q]);
      uintptr_t tail = 0;
      if constexpr (N > 0) tail = tail_base[q];
      else tail = past_end_base(q);
      const auto* pf = past_end ? reinterpret_cast<const char*>(tail) : row;
      prefetch_ahead(pf, i * es, ahead);
      if constexpr (In == DType::f32) prefetch_ahead(pf, i * es + 64, ahead);
      const Pair x = load_pair<In>(row, i);
      const __m512 wq = weight(q);
      acc = {_mm512_fmadd_ps(wq, x.a, acc.a), _mm512_fmadd_ps(wq, x.b, acc.b)};
    }
    return acc;
  };
  // The masked ends (fewer than 32 elements, or the head before the first whole output line).
  auto single = [&](int64_t i, __mmask16 m) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t q = 0; q < count; ++q)
      if (N > 0 || r[q]) acc = _mm512_fmadd_ps(weight(q), load16(r[q], In, i, m), acc);
    return acc;
  };
  map_row_pairs<In, Out>(out, h, stream, step, single);
}

template <DType In, DType Out>
void weighted_sum_dispatch(const void* const* rows, const float* w, int64_t k, const void* const* next_rows,
                           int64_t next_k, void* out, int64_t h, bool stream, int64_t ahead) {
  std::vector<const void*> next_all;
  if (k > 2 * kMaxUnrolled) {
    next_all.assign(size_t(k), nullptr);
    for (int64_t j = 0; j < std::min(k, next_k); ++j) next_all[size_t(j)] = next_rows[j];
    return weighted_sum<In, Out, 0>(rows, w, k, next_all.data(), out, h, stream, ahead);
  }
  // The live rows in order: the unrolled sweeps then skip no terms and reorder none. The next
  // token's live rows pair with them slot by slot.
  const void* live[2 * kMaxUnrolled];
  const void* next[2 * kMaxUnrolled] = {};
  float lw[2 * kMaxUnrolled];
  int n = 0;
  for (int64_t j = 0; j < k; ++j)
    if (rows[j]) live[n] = rows[j], lw[n++] = w[j];
  for (int64_t j = 0, m = 0; j < next_k && m < n; ++j)
    if (next_rows[j]) next[m++] = next_rows[j];
  switch (n) {
    case 1: return weighted_sum<In, Out, 1>(live, lw, n, next, out, h, stream, ahead);
    case 2: return weighted_sum<In, Out, 2>(live, lw, n, next, out, h, stream, ahead);
    case 3: return weighted_sum<In, Out, 3>(live, lw, n, next, out, h, stream, ahead);
    case 4: return weighted_sum<In, Out, 4>(live, lw, n, next, out, h, stream, ahead);
    case 5: return weighted_sum<In, Out, 5>(live, lw, n, next, out, h, stream, ahead);
    case 6: return weighted_sum<In, Out, 6>(live, lw, n, next, out, h, stream, ahead);
    case 7: return weighted_sum<In, Out, 7>(live, lw, n, next, out, h, stream, ahead);
    case 8: return weighted_sum<In, Out, 8>(live, lw, n, next, out, h, stream, ahead);
    default: return weighted_sum<In, Out, 0>(live, lw, n, next, out, h, stream, ahead);  // 0 rows: zeros
  }
}

}  // namespace

void weighted_row_sum_avx512(const void* const* rows, const float* w, int64_t k, const void* const* next_rows,
                             int64_t next_k, DType t, void* out, DType ot, int64_t h, bool stream,
                             const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  auto run = [&]<DType In, DType Out>() {
    weighted_sum_dispatch<In, Out>(rows, w, k, next_rows, next_k, out, h, stream, ahead);
  };
  if (t == DType::bf16) {
    if (ot == DType::bf16) run.template operator()<DType::bf16, DType::bf16>();
    else run.template operator()<DType::bf16, DType::f32>();
  } else {
    if (ot == DType::bf16) run.template operator()<DType::f32, DType::bf16>();
    else run.template operator()<DType::f32, DType::f32>();
  }
}

}  // namespace sol::kernels
