// Softmax routing with one token per lane (kernels/route.h route_softmax_lanes_avx512).
#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/x86/avx512/pair_avx512.h"
#include "kernels/x86/avx512/route16_avx512.h"

namespace sol::kernels {

namespace {

template <int K>
void route_lanes(const RouteSoftmaxLanes& r, int64_t t0, int64_t t1) {
  const int64_t e = r.e;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Element j of each lane's token is at lane * e + j from the first token of the step.
  const __m512i row_at = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(e)));
  const __m512i out_at = _mm512_mullo_epi32(lane, _mm512_set1_epi32(K));
  alignas(64) float ex[16][16];  // [expert][token lane]: logits, then their exponentials
  for (int64_t t = t0; t < t1; t += 16) {
    const __mmask16 live = tail_mask(t1 - t);
    const float* base = r.logits + t * e;
    // The step after next: its e lines requested now (the gathers wait on each line they touch).
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(base) + uintptr_t(2 * 16 * 4 * e);
    // The maximum of the numbers: vmaxps returns its second operand when the first is NaN, so
    // NaN logits drop out, as in the row kernel (its sign of zero does not matter: max - x is
    // then -x exactly, or +-0, whose exponential is 1 either way).
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < e; ++j) {
      asm volatile("prefetcht0 (%0)" : : "r"(ahead + uintptr_t(64 * j)));
      const __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, _mm512_add_epi32(row_at, _mm512_set1_epi32(int32_t(j))), base, 4);
      _mm512_store_ps(ex[j], x);
      mx = _mm512_max_ps(x, mx);
    }
    // The exponentials and their sum from +0 in expert order (the row kernel's order).
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < e; ++j) {
      const __m512 v = exp_neg_of_nonnegative(_mm512_sub_ps(mx, _mm512_load_ps(ex[j])));
      _mm512_store_ps(ex[j], v);
      sum = _mm512_add_ps(sum, v);
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    // Per lane the best K so far, best first: key, expert, score. Empty slots hold INT_MIN,
    // below the NaN key, so NaN scores fill them (in expert order) and nothing else does.
    __m512i sk[K], si[K];
    __m512 ss[K];
    for (int q = 0; q < K; ++q) sk[q] = _mm512_set1_epi32(INT_MIN), si[q] = _mm512_setzero_si512(), ss[q] = _mm512_setzero_ps();
    for (int64_t j = 0; j < e; ++j) {
      const __m512 s = _mm512_mul_ps(_mm512_load_ps(ex[j]), inv);
      const __m512i kj = key16(r.bias ? _mm512_add_ps(s, _mm512_set1_ps(r.bias[j])) : s);
      const __m512i ij = _mm512_set1_epi32(int32_t(j));
      __mmask16 beats[K];
      for (int q = 0; q < K; ++q) beats[q] = _mm512_cmpgt_epi32_mask(kj, sk[q]);
      // Slots are sorted, so beats[q] implies beats[q + 1]: slot q takes slot q - 1 where the
      // new key beat that one too, else the new key where it beats slot q.
      for (int q = K - 1; q > 0; --q) {
        sk[q] = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(sk[q], beats[q], kj), beats[q - 1], sk[q - 1]);
        si[q] = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(si[q], beats[q], ij), beats[q - 1], si[q - 1]);
        ss[q] = _mm512_mask_mov_ps(_mm512_mask_mov_ps(ss[q], beats[q], s), beats[q - 1], ss[q - 1]);
      }
      sk[0] = _mm512_mask_mov_epi32(sk[0], beats[0], kj);
      si[0] = _mm512_mask_mov_epi32(si[0], beats[0], ij);
      ss[0] = _mm512_mask_mov_ps(ss[0], beats[0], s);
    }
    // Weights: the chosen scores summed from +0 in output order, then scaled, as the op's
    // scalar loop does per token.
    __m512 wsum = _mm512_setzero_ps();
    for (int q = 0; q < K; ++q) wsum = _mm512_add_ps(wsum, ss[q]);
    const __m512 factor = r.renormalize ? _mm512_div_ps(_mm512_set1_ps(r.scaling), wsum) : _mm512_set1_ps(r.scaling);
    int32_t* idx = r.idx + t * K;
    float* w = r.weights + t * K;
    if constexpr (K == 2) {
      // Two slots: the 32 outputs of 16 tokens are the two slot vectors interleaved, two
      // permutes and two (masked) stores per output instead of two scatters.
      const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
      const int64_t n = 2 * std::min<int64_t>(16, t1 - t);
      const __mmask16 m_lo = tail_mask(n), m_hi = n > 16 ? tail_mask(n - 16) : __mmask16(0);
      const __m512 w0 = _mm512_mul_ps(ss[0], factor), w1 = _mm512_mul_ps(ss[1], factor);
      _mm512_mask_storeu_epi32(idx, m_lo, _mm512_permutex2var_epi32(si[0], lo, si[1]));
      _mm512_mask_storeu_epi32(idx + 16, m_hi, _mm512_permutex2var_epi32(si[0], hi, si[1]));
      _mm512_mask_storeu_ps(w, m_lo, _mm512_permutex2var_ps(w0, lo, w1));
      _mm512_mask_storeu_ps(w + 16, m_hi, _mm512_permutex2var_ps(w0, hi, w1));
    } else {
      for (int q = 0; q < K; ++q) {
        const __m512i at = _mm512_add_epi32(out_at, _mm512_set1_epi32(q));
        _mm512_mask_i32scatter_epi32(idx, live, at, si[q], 4);
        _mm512_mask_i32scatter_ps(w, live, at, _mm512_mul_ps(ss[q], factor), 4);
      }
    }
  }
}

}  // namespace

void route_softmax_lanes_avx512(const RouteSoftmaxLanes& r, int64_t t0, int64_t t1) {
  switch (r.k) {
    case 1: return route_lanes<1>(r, t0, t1);
    case 2: return route_lanes<2>(r, t0, t1);
    case 3: return route_lanes<3>(r, t0, t1);
    case 4: return route_lanes<4>(r, t0, t1);
    case 5: return route_lanes<5>(r, t0, t1);
    case 6: return route_lanes<6>(r, t0, t1);
    case 7: return route_lanes<7>(r, t0, t1);
    default: return route_lanes<8>(r, t0, t1);
  }
}

}  // namespace sol::kernels
