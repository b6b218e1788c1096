// AVX2 rope: the scalar kernel's arithmetic (r = fma(x[p], s, x * c) per element), eight
// elements a vector, bit for bit the scalar results, with the look-ahead of the AVX-512 level
// (rope_lookahead.h). bf16 interleaved slices a multiple of 16 wide split each 32-byte chunk
// into its even and odd values and round both results in one integer pass (pair_avx2.h; the
// slice is bf16 and the tables finite, so its NaNs round exactly); other slices are widened to
// f32 first (in place is safe) and take the partner by a swap inside each 128-bit lane
// (interleaved) or a second load (half).
#include <immintrin.h>

#include <cmath>

#include "kernels/rope.h"
#include "kernels/x86/avx2/pair_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"
#include "kernels/x86/rope_lookahead.h"

namespace sol::kernels {

namespace {

// The 16 bf16 at p (8 interleaved pairs) rotated in place, tables at pair j.
[[gnu::always_inline]] inline void rotate_chunk(char* p, const float* c_even, const float* c_odd, const float* s_even,
                                                const float* s_odd) {
  const Pair8 v = load_bf16x16(reinterpret_cast<const uint16_t*>(p));
  const __m256 a = v.even, b = v.odd;
  const __m256 even = _mm256_fmadd_ps(b, _mm256_load_ps(s_even), _mm256_mul_ps(a, _mm256_load_ps(c_even)));
  const __m256 odd = _mm256_fmadd_ps(a, _mm256_load_ps(s_odd), _mm256_mul_ps(b, _mm256_load_ps(c_odd)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_pairs(even, odd));
}

// bf16 interleaved slices with d a multiple of 16.
[[gnu::always_inline]] inline void rotate_bf16_chunks(char* x, const SplitTables& t, int64_t d) {
  for (int64_t j = 0; j < d / 2; j += 8)
    rotate_chunk(x + 4 * j, t.c_even + j, t.c_odd + j, t.s_even + j, t.s_odd + j);
}

// Slices of exactly L lines (MLA's 64-wide slice: L = 2): the chunk loop unrolled over the
// token's tables, which sixteen ymm registers cannot hold (they are read from L1).
template <int L>
struct ChunkTables {
  static constexpr int kLines = L;
  alignas(32) float c_even[16 * L], c_odd[16 * L], s_even[16 * L], s_odd[16 * L];
  explicit ChunkTables(const SplitTables& t) {
    for (int j = 0; j < 16 * L; ++j)
      c_even[j] = t.c_even[j], c_odd[j] = t.c_odd[j], s_even[j] = t.s_even[j], s_odd[j] = t.s_odd[j];
  }
  [[gnu::always_inline]] void rotate(char* slice) const {
#pragma GCC unroll 4
    for (int j = 0; j < 16 * L; j += 8) rotate_chunk(slice + 4 * j, c_even + j, c_odd + j, s_even + j, s_odd + j);
  }
};

template <int L>
using Token = LineToken<ChunkTables<L>>;

// Any other slice: widened to f32 before anything is written, so every partner is the old value.
void rotate_widened(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved) {
  alignas(32) float v[512];  // rope_dim <= 512 is checked by the op
  int64_t i = 0;
  if (t == DType::bf16) {
    const uint16_t* in = static_cast<const uint16_t*>(x);
    for (; i + 8 <= d; i += 8) _mm256_store_ps(v + i, widen8_bf16(in + i));
    for (; i < d; ++i) v[i] = bf16_to_f32(in[i]);
  } else {
    for (; i < d; ++i) v[i] = static_cast<const float*>(x)[i];
  }
  const int64_t half = d / 2;
  const int64_t vector_end = interleaved ? d / 8 * 8 : (half % 8 == 0 ? d : 0);
  for (i = 0; i < vector_end; i += 8) {
    const __m256 vi = _mm256_load_ps(v + i);
    const __m256 vp = interleaved ? _mm256_permute_ps(vi, 0xB1) : _mm256_load_ps(v + (i + half) % d);
    const __m256 r = _mm256_fmadd_ps(vp, _mm256_loadu_ps(s + i), _mm256_mul_ps(vi, _mm256_loadu_ps(c + i)));
    store8(x, t, i, r);
  }
  for (; i < d; ++i) {
    const int64_t p = interleaved ? (i ^ 1) : (i + half) % d;
    const float r = std::fma(v[p], s[i], v[i] * c[i]);
    if (t == DType::bf16) static_cast<uint16_t*>(x)[i] = f32_to_bf16(r);
    else static_cast<float*>(x)[i] = r;
  }
}

// Head h of a token in the general loop: its requests, then its rotation.
[[gnu::always_inline]] inline void rotate_head(const TokenHeads& tok, int64_t h, DType t, int64_t stride,
                                               int64_t heads, int64_t d, bool interleaved, bool by_chunks,
                                               int64_t bytes, int64_t ahead, int64_t ahead2) {
  char* slice = tok.requested(h, heads, stride, bytes, ahead, ahead2);
  if (by_chunks) rotate_bf16_chunks(slice, tok.tables, d);
  else rotate_widened(slice, t, tok.c, tok.s, d, interleaved);
}

bool by_chunks(DType t, int64_t d, bool interleaved) { return interleaved && t == DType::bf16 && d % 16 == 0; }

}  // namespace

void rope_rotate_heads_avx2(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                            int64_t d, bool interleaved, const void* next, const TuningParams& tp) {
  const int64_t ahead = tp.rope_prefetch_heads, ahead2 = tp.rope_l2_prefetch_heads;
  const bool chunks = by_chunks(t, d, interleaved);
  const RopeToken one{x, c, s, next};
  if (chunks && d == 64) return rotate_tokens_lines<ChunkTables<2>>(head_stride, heads, ahead, ahead2, Token<2>(one));
  if (chunks && d == 32) return rotate_tokens_lines<ChunkTables<1>>(head_stride, heads, ahead, ahead2, Token<1>(one));
  alignas(64) const TokenHeads tok(one, chunks ? d : 0);
  const int64_t bytes = d * int64_t(dtype_size(t));
  for (int64_t h = 0; h < heads; ++h)
    rotate_head(tok, h, t, head_stride, heads, d, interleaved, chunks, bytes, ahead, ahead2);
}

void rope_rotate_two_tokens_avx2(const RopeToken& a, const RopeToken& b, DType t, int64_t head_stride, int64_t heads,
                                 int64_t d, bool interleaved, const TuningParams& tp) {
  const int64_t ahead = tp.rope_prefetch_heads, ahead2 = tp.rope_l2_prefetch_heads;
  const bool chunks = by_chunks(t, d, interleaved);
  if (chunks && d == 64)
    return rotate_tokens_lines<ChunkTables<2>>(head_stride, heads, ahead, ahead2, Token<2>(a), Token<2>(b));
  if (chunks && d == 32)
    return rotate_tokens_lines<ChunkTables<1>>(head_stride, heads, ahead, ahead2, Token<1>(a), Token<1>(b));
  alignas(64) const TokenHeads ta(a, chunks ? d : 0), tb(b, chunks ? d : 0);
  const int64_t bytes = d * int64_t(dtype_size(t));
  for (int64_t h = 0; h < heads; ++h) {
    rotate_head(ta, h, t, head_stride, heads, d, interleaved, chunks, bytes, ahead, ahead2);
    rotate_head(tb, h, t, head_stride, heads, d, interleaved, chunks, bytes, ahead, ahead2);
  }
}

}  // namespace sol::kernels
