// AVX-512 rope rotation of one token's heads (helpers in fast16_avx512.h).
#include <cstring>

#include "kernels/rope.h"
#include "kernels/x86/avx512/pair_avx512.h"
#include "kernels/x86/rope_lookahead.h"

namespace sol::kernels {

namespace {

// Interleaved pairs are neighbours (d is even, blocks start at even lanes): each 16-lane block
// rotates on its own, read and written in place.
[[gnu::always_inline]] inline void rotate_interleaved(void* x, DType t, const float* c, const float* s, int64_t d) {
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = tail_mask(d - i);
    const __m512 xv = load16(x, t, i, m);
    const __m512 r = _mm512_fmadd_ps(_mm512_permute_ps(xv, 0xB1), _mm512_maskz_loadu_ps(m, s + i),
                                     _mm512_mul_ps(xv, _mm512_maskz_loadu_ps(m, c + i)));
    store16_fast(x, t, i, m, r);
  }
}

// bf16 slices with d a multiple of 32, one line (16 pairs) per step.
[[gnu::always_inline]] inline void rotate_interleaved_bf16_lines(void* x, const SplitTables& tb, int64_t d) {
  for (int64_t i = 0; i < d; i += 32) {
    const Pair v = load_pair<DType::bf16>(x, i);
    const int64_t j = i / 2;
    const Pair r{_mm512_fmadd_ps(v.b, _mm512_load_ps(tb.s_even + j), _mm512_mul_ps(v.a, _mm512_load_ps(tb.c_even + j))),
                 _mm512_fmadd_ps(v.a, _mm512_load_ps(tb.s_odd + j), _mm512_mul_ps(v.b, _mm512_load_ps(tb.c_odd + j)))};
    store_pair<DType::bf16, DType::bf16>(x, i, r, false);
  }
}

// bf16 interleaved slices of exactly L lines (MLA's 64-wide slice: L = 2), one or two tokens at a
// time: the tokens' tables stay in registers (4 L each), every loop over lines and prefetches
// is unrolled, and each prefetch address steps by one head stride. What is left per head and
// line is the load, the two multiplies and two FMAs of rotate_interleaved_bf16_lines (same
// operands, same order: the same bits), the narrowing and the store.
template <int L>
struct LineTables {
  static constexpr int kLines = L;
  __m512 c_even[L], c_odd[L], s_even[L], s_odd[L];
  explicit LineTables(const SplitTables& t) {
    for (int l = 0; l < L; ++l) {
      c_even[l] = _mm512_load_ps(t.c_even + 16 * l), c_odd[l] = _mm512_load_ps(t.c_odd + 16 * l);
      s_even[l] = _mm512_load_ps(t.s_even + 16 * l), s_odd[l] = _mm512_load_ps(t.s_odd + 16 * l);
    }
  }
  [[gnu::always_inline]] void rotate(char* slice) const {
    for (int l = 0; l < L; ++l) {
      const Pair v = load_pair<DType::bf16>(slice, 32 * l);
      const Pair r{_mm512_fmadd_ps(v.b, s_even[l], _mm512_mul_ps(v.a, c_even[l])),
                   _mm512_fmadd_ps(v.a, s_odd[l], _mm512_mul_ps(v.b, c_odd[l]))};
      store_pair<DType::bf16, DType::bf16>(slice, 32 * l, r, false);
    }
  }
};

template <int L>
using Lines = LineTables<L>;
template <int L>
using Token = LineToken<LineTables<L>>;

// Half pairs are d/2 apart: the slice is read whole before anything is written (d <= 512 floats
// on the stack), as every output needs its partner's old value.
void rotate_half(void* x, DType t, const float* c, const float* s, int64_t d) {
  alignas(64) float v[512 + 16], partner[512 + 16];
  for (int64_t i = 0; i < d; i += 16) _mm512_store_ps(v + i, load16(x, t, i, tail_mask(d - i)));
  std::memcpy(partner, v + d / 2, sizeof(float) * size_t(d - d / 2));
  std::memcpy(partner + (d - d / 2), v, sizeof(float) * size_t(d / 2));
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = tail_mask(d - i);
    const __m512 r = _mm512_fmadd_ps(_mm512_load_ps(partner + i), _mm512_maskz_loadu_ps(m, s + i),
                                     _mm512_mul_ps(_mm512_load_ps(v + i), _mm512_maskz_loadu_ps(m, c + i)));
    store16_fast(x, t, i, m, r);
  }
}

// Head h of a token in the general loop: its requests, then its rotation.
[[gnu::always_inline]] inline void rotate_head(const TokenHeads& tok, int64_t h, DType t, int64_t head_stride,
                                               int64_t heads, int64_t d, bool interleaved, bool by_lines,
                                               int64_t bytes, int64_t ahead_heads, int64_t ahead2) {
  char* slice = tok.requested(h, heads, head_stride, bytes, ahead_heads, ahead2);
  if (by_lines) rotate_interleaved_bf16_lines(slice, tok.tables, d);
  else if (interleaved) rotate_interleaved(slice, t, tok.c, tok.s, d);
  else rotate_half(slice, t, tok.c, tok.s, d);
}

}  // namespace

void rope_rotate_heads_avx512(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next, const TuningParams& tp) {
  const int64_t ahead_heads = tp.rope_prefetch_heads, ahead2 = tp.rope_l2_prefetch_heads;
  const int64_t bytes = d * int64_t(dtype_size(t));
  const bool by_lines = interleaved && t == DType::bf16 && d % 32 == 0;
  const RopeToken one{x, c, s, next};
  if (by_lines && d == 64) return rotate_tokens_lines<Lines<2>>(head_stride, heads, ahead_heads, ahead2, Token<2>(one));
  if (by_lines && d == 32) return rotate_tokens_lines<Lines<1>>(head_stride, heads, ahead_heads, ahead2, Token<1>(one));
  alignas(64) const TokenHeads tok(one, by_lines ? d : 0);
  for (int64_t h = 0; h < heads; ++h)
    rotate_head(tok, h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads, ahead2);
}

void rope_rotate_two_tokens_avx512(const RopeToken& a, const RopeToken& b, DType t, int64_t head_stride, int64_t heads,
                                   int64_t d, bool interleaved, const TuningParams& tp) {
  const int64_t ahead_heads = tp.rope_prefetch_heads, ahead2 = tp.rope_l2_prefetch_heads;
  const int64_t bytes = d * int64_t(dtype_size(t));
  const bool by_lines = interleaved && t == DType::bf16 && d % 32 == 0;
  if (by_lines && d == 64)
    return rotate_tokens_lines<Lines<2>>(head_stride, heads, ahead_heads, ahead2, Token<2>(a), Token<2>(b));
  if (by_lines && d == 32)
    return rotate_tokens_lines<Lines<1>>(head_stride, heads, ahead_heads, ahead2, Token<1>(a), Token<1>(b));
  alignas(64) const TokenHeads ta(a, by_lines ? d : 0);
  alignas(64) const TokenHeads tb(b, by_lines ? d : 0);
  for (int64_t h = 0; h < heads; ++h) {
    rotate_head(ta, h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads, ahead2);
    rotate_head(tb, h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads, ahead2);
  }
}

}  // namespace sol::kernels
