// Softmax routing with one token per lane (kernels/route.h route_softmax_lanes_avx512).
#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/x86/avx512/pair_avx512.h"
#include "kernels/x86/avx512/route16_avx512.h"

namespace sol::kernels {

namespace {

struct Lanes {
  alignas(64) int32_t v[16];
};

// Eight experts: a full step of 16 tokens is 8 vectors in memory (two tokens each) and is put
// into one vector per expert by three rounds of two-source permutes, each trading one bit of the
// vector number (a token bit) for one bit of the lane (an expert bit) — 8 loads and 24 permutes
// instead of 8 gathers. Lane bits end as (t0 t3 t2 t1), so lane L holds token token_of(L).
constexpr int token_of(int l) { return ((l >> 2) & 1) << 3 | ((l >> 1) & 1) << 2 | (l & 1) << 1 | (l >> 3); }
constexpr int lane_of(int t) {
  for (int l = 0; l < 16; ++l)
    if (token_of(l) == t) return l;
  return -1;
}
// Round tables: output c of a pair (a, b) takes lane L from b where L has lane bit `bit`, else
// from a, at L with that bit set to c.
constexpr Lanes exchange(int bit, int c) {
  Lanes t{};
  for (int l = 0; l < 16; ++l) t.v[l] = ((l & bit) ? 16 : 0) + ((l & ~bit) | (c ? bit : 0));
  return t;
}
constexpr Lanes token_lanes(bool transposed) {
  Lanes t{};
  for (int l = 0; l < 16; ++l) t.v[l] = transposed ? token_of(l) : l;
  return t;
}
// Two slots interleaved for 16 tokens: output o (of 32; `half` 0 or 1) is token o / 2's slot o % 2.
constexpr Lanes interleave(bool transposed, int half) {
  Lanes t{};
  for (int i = 0; i < 16; ++i) {
    const int o = 16 * half + i, tok = o / 2;
    t.v[i] = 16 * (o % 2) + (transposed ? lane_of(tok) : tok);
  }
  return t;
}

// x[j] = expert j of the 16 tokens at `base` (8 experts, lanes as token_of).
[[gnu::always_inline]] inline void transpose_16x8(const float* base, __m512* x) {
  __m512 v[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm512_loadu_ps(base + 16 * i);
  // Vector bits (t3 t2 t1), lane bits (t0 j2 j1 j0); round r trades vector bit 2 - r for lane
  // bit 2 - r.
  for (int r = 0; r < 3; ++r) {
    static constexpr Lanes tab[3][2] = {{exchange(4, 0), exchange(4, 1)}, {exchange(2, 0), exchange(2, 1)},
                                        {exchange(1, 0), exchange(1, 1)}};
    const int vbit = 4 >> r;
    const __m512i i0 = _mm512_load_si512(tab[r][0].v), i1 = _mm512_load_si512(tab[r][1].v);
    __m512 w[8];
    for (int a = 0; a < 8; ++a) {
      if (a & vbit) continue;
      w[a] = _mm512_permutex2var_ps(v[a], i0, v[a | vbit]);
      w[a | vbit] = _mm512_permutex2var_ps(v[a], i1, v[a | vbit]);
    }
    for (int a = 0; a < 8; ++a) v[a] = w[a];
  }
  for (int j = 0; j < 8; ++j) x[j] = v[j];
}

template <int K>
void route_lanes(const RouteSoftmaxLanes& r, int64_t t0, int64_t t1) {
  const int64_t e = r.e;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Element j of each lane's token is at lane * e + j from the first token of the step.
  const __m512i row_at = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(e)));
  alignas(64) float ex[16][16];  // [expert][token lane]: logits, then their exponentials
  for (int64_t t = t0; t < t1; t += 16) {
    const __mmask16 live = tail_mask(t1 - t);
    const float* base = r.logits + t * e;
    const bool transposed = e == 8 && live == 0xFFFF;
    static constexpr Lanes tokens[2] = {token_lanes(false), token_lanes(true)};
    const __m512i out_at = _mm512_mullo_epi32(_mm512_load_si512(tokens[transposed].v), _mm512_set1_epi32(K));
    // The step after next: its e lines requested now (the gathers wait on each line they touch).
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(base) + uintptr_t(2 * 16 * 4 * e);
    // The maximum of the numbers: vmaxps returns its second operand when the first is NaN, so
    // NaN logits drop out, as in the row kernel (its sign of zero does not matter: max - x is
    // then -x exactly, or +-0, whose exponential is 1 either way).
    __m512 mx = _mm512_set1_ps(-INFINITY);
    if (transposed) {
      __m512 x[8];
      transpose_16x8(base, x);
      for (int j = 0; j < 8; ++j) {
        asm volatile("prefetcht0 (%0)" : : "r"(ahead + uintptr_t(64 * j)));
        _mm512_store_ps(ex[j], x[j]);
        mx = _mm512_max_ps(x[j], mx);
      }
    } else {
      for (int64_t j = 0; j < e; ++j) {
        asm volatile("prefetcht0 (%0)" : : "r"(ahead + uintptr_t(64 * j)));
        const __m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, _mm512_add_epi32(row_at, _mm512_set1_epi32(int32_t(j))), base, 4);
        _mm512_store_ps(ex[j], x);
        mx = _mm512_max_ps(x, mx);
      }
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
      static constexpr Lanes tab[2][2] = {{interleave(false, 0), interleave(false, 1)},
                                          {interleave(true, 0), interleave(true, 1)}};
      const __m512i lo = _mm512_load_si512(tab[transposed][0].v), hi = _mm512_load_si512(tab[transposed][1].v);
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
