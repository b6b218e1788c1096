// AVX-512 rope rotation of one token's heads (helpers in fast16_avx512.h).
#include <algorithm>
#include <cstring>

#include "kernels/rope.h"
#include "kernels/x86/avx512/pair_avx512.h"

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

// The tables of one position split into even and odd elements, 32 per line of bf16: a rotated
// pair (x[2j], x[2j+1]) is then lane j of the two halves of a line (pair_avx512.h), so no
// permute is needed, and x[i] c[i] + x[i ^ 1] s[i] is computed with the same two operations in
// the same order, bit for bit.
struct SplitTables {
  alignas(64) float c_even[256], c_odd[256], s_even[256], s_odd[256];
  SplitTables(const float* c, const float* s, int64_t d) {
    for (int64_t j = 0; j < d / 2; ++j) {
      c_even[j] = c[2 * j], c_odd[j] = c[2 * j + 1];
      s_even[j] = s[2 * j], s_odd[j] = s[2 * j + 1];
    }
  }
};

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

// bf16 interleaved slices of exactly L lines (MLA's 64-wide slice: L = 2), two tokens at a
// time: both tokens' tables stay in registers (4 L each), every loop over lines and prefetches
// is unrolled, and each prefetch address steps by one head stride. What is left per head and
// line is the load, the two multiplies and two FMAs of rotate_interleaved_bf16_lines (same
// operands, same order: the same bits), the narrowing and the store.
template <int L>
struct LineTables {
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
[[gnu::always_inline]] inline void prefetch_lines(const char* p) {
  for (int l = 0; l < L; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

// The same prefetches as TokenHeads::head, in three runs of heads: while the slice ahead is in
// this token, while it is in the next token's heads (when there is one), and past those.
template <int L>
void rotate_two_tokens_lines(const RopeToken& a, const RopeToken& b, int64_t stride, int64_t heads, int64_t ahead) {
  const LineTables<L> ta(SplitTables(a.c, a.s, 32 * L)), tb(SplitTables(b.c, b.s, 32 * L));
  char* xa = static_cast<char*>(a.x);
  char* xb = static_cast<char*>(b.x);
  const int64_t in_token = std::max<int64_t>(0, heads - ahead);
  const int64_t in_next = std::clamp<int64_t>(2 * heads - ahead, in_token, heads);
  int64_t h = 0;
  for (; h < in_token; ++h) {
    prefetch_lines<L>(xa + (h + ahead) * stride);
    ta.rotate(xa + h * stride);
    prefetch_lines<L>(xb + (h + ahead) * stride);
    tb.rotate(xb + h * stride);
  }
  const char* na = static_cast<const char*>(a.next);
  const char* nb = static_cast<const char*>(b.next);
  for (; h < in_next; ++h) {
    const int64_t j = h + ahead - heads;  // the next token's head
    if (na) prefetch_lines<L>(na + j * stride);
    ta.rotate(xa + h * stride);
    if (nb) prefetch_lines<L>(nb + j * stride);
    tb.rotate(xb + h * stride);
  }
  for (; h < heads; ++h) {
    ta.rotate(xa + h * stride);
    tb.rotate(xb + h * stride);
  }
}

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

// One token's heads: its tables and where its prefetches go.
struct TokenHeads {
  char* x;
  const float* c;
  const float* s;
  const char* next;
  SplitTables tables;
  TokenHeads(void* x_, const float* c_, const float* s_, const void* next_, int64_t split_d)
      : x(static_cast<char*>(x_)), c(c_), s(s_), next(static_cast<const char*>(next_)), tables(c_, s_, split_d) {}

  // Head h: prefetch the slice ahead_heads ahead (into the next token's heads past the last),
  // then rotate.
  [[gnu::always_inline]] void head(int64_t h, DType t, int64_t head_stride, int64_t heads, int64_t d, bool interleaved,
                                   bool by_lines, int64_t bytes, int64_t ahead_heads) const {
    char* slice = x + h * head_stride;
    const int64_t ahead = h + ahead_heads;
    const char* fetch = ahead < heads ? x + ahead * head_stride : next ? next + (ahead - heads) * head_stride : nullptr;
    if (fetch && (ahead < heads || ahead - heads < heads))
      for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(fetch + b, _MM_HINT_T0);
    if (by_lines) rotate_interleaved_bf16_lines(slice, tables, d);
    else if (interleaved) rotate_interleaved(slice, t, c, s, d);
    else rotate_half(slice, t, c, s, d);
  }
};

}  // namespace

void rope_rotate_heads_avx512(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next, const TuningParams& tp) {
  const int64_t ahead_heads = tp.rope_prefetch_heads;
  const int64_t bytes = d * int64_t(dtype_size(t));
  const bool by_lines = interleaved && t == DType::bf16 && d % 32 == 0;
  alignas(64) const TokenHeads tok(x, c, s, next, by_lines ? d : 0);
  for (int64_t h = 0; h < heads; ++h) tok.head(h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads);
}

void rope_rotate_two_tokens_avx512(const RopeToken& a, const RopeToken& b, DType t, int64_t head_stride, int64_t heads,
                                   int64_t d, bool interleaved, const TuningParams& tp) {
  const int64_t ahead_heads = tp.rope_prefetch_heads;
  const int64_t bytes = d * int64_t(dtype_size(t));
  const bool by_lines = interleaved && t == DType::bf16 && d % 32 == 0;
  if (by_lines && d == 64) return rotate_two_tokens_lines<2>(a, b, head_stride, heads, ahead_heads);
  if (by_lines && d == 32) return rotate_two_tokens_lines<1>(a, b, head_stride, heads, ahead_heads);
  alignas(64) const TokenHeads ta(a.x, a.c, a.s, a.next, by_lines ? d : 0);
  alignas(64) const TokenHeads tb(b.x, b.c, b.s, b.next, by_lines ? d : 0);
  for (int64_t h = 0; h < heads; ++h) {
    ta.head(h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads);
    tb.head(h, t, head_stride, heads, d, interleaved, by_lines, bytes, ahead_heads);
  }
}

}  // namespace sol::kernels
