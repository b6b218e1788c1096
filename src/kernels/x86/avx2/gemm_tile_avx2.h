#pragma once
// Shared by the AVX2 GEMM kernels (gemm_{f32,bf16,s8}_avx2.cc). They read the same packed
// panels as the AVX-512 kernels (kernels/gemm.h: 12-row A panels, 32-column B panels), but 16
// ymm registers hold far fewer sums than 32 zmm, so a 12 x 32 tile is computed as sub-tiles of
// R rows x 16 columns (two ymm per row), each over the whole K block. The panels stay in L1
// between the sub-tiles: the B half a sub-tile reads is KC x 64 bytes.
// Included only by AVX2 translation units; everything is in an anonymous namespace so no
// baseline code can link to it.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/gemm.h"
#include "kernels/x86/avx2/codes_avx2.h"  // bf16 rounding as src/core/convert.cc
#include "kernels/x86/avx2/subtile_avx2.h"

namespace sol::kernels {
namespace {

constexpr int kHalfCols = 16;  // a sub-tile's columns: two ymm of f32 or int32

// 8 values of f32 or bf16 at p, the first `valid` of them (others zero).
[[gnu::always_inline]] inline __m256 load8_f32_or_bf16(const void* p, bool bf16, int valid) {
  if (!bf16) {
    if (valid == 8) return _mm256_loadu_ps(static_cast<const float*>(p));
    return _mm256_maskload_ps(static_cast<const float*>(p), lane_mask(valid));
  }
  __m128i h;
  if (valid == 8) {
    h = _mm_loadu_si128(static_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t buf[8] = {};
    std::memcpy(buf, p, size_t(valid) * 2);
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

[[gnu::always_inline]] inline void store8_f32_or_bf16(void* p, bool bf16, int valid, __m256 v) {
  if (!bf16) {
    if (valid == 8) return _mm256_storeu_ps(static_cast<float*>(p), v);
    return _mm256_maskstore_ps(static_cast<float*>(p), lane_mask(valid), v);
  }
  const __m256i w = f32x8_to_bf16(v);
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  if (valid == 8) return _mm_storeu_si128(static_cast<__m128i*>(p), packed);
  alignas(16) uint16_t buf[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), packed);
  std::memcpy(p, buf, size_t(valid) * 2);
}

// exp(t) = 2^n * e^r with n = round(t / ln 2), |r| <= ln2 / 2; e^r by its degree-7 Taylor
// polynomial. 2^n is applied as two exact powers of two (n / 2 and n - n / 2, each within the
// exponent range for the clamped t), so the result overflows to inf and underflows to zero
// exactly where exp does.
[[gnu::always_inline]] inline __m256 exp_avx2(__m256 t) {
  t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(100.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), t);  // ln 2, high part
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);       // ln 2, low part
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const auto pow2 = [](__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2));
}

// x / (1 + exp(-x)): a NaN x stays NaN, and -inf gives -inf / inf = NaN as the reference does.
[[gnu::always_inline]] inline __m256 silu_avx2(__m256 x) {
  const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// D's row i (and C's) requested into L2 before the K loop, as the AVX-512 tiles do
// (gemm_tile_avx512.h, prefetch_output_row): the epilogue's stores then find their lines.
[[gnu::always_inline]] inline void prefetch_output_row(const GemmEpilogue& e, int64_t i, int col0) {
  const int64_t es = e.d_bf16 ? 2 : 4;
  _mm_prefetch(static_cast<const char*>(e.d) + (i * e.ldd + col0) * es, _MM_HINT_T1);
  if (e.beta != 0.0f) _mm_prefetch(static_cast<const char*>(e.c) + (i * e.ldc + col0) * es, _MM_HINT_T0);
}

// The start of a sub-tile's K loop: requests its rows of the partial sums and of D.
template <int R>
[[gnu::always_inline]] inline void request_rows(const GemmTile& t, int i0, int col0) {
  for (int i = i0; i < i0 + R; ++i) {
    if (!t.first) _mm_prefetch(reinterpret_cast<const char*>(t.partial + i * t.ldp + col0), _MM_HINT_T0);
    if (t.last) prefetch_output_row(*t.last, i, col0);
  }
}

// One 8-column vector of f32 sums (row i, columns col..col+7, `valid` of them) after its K
// block: plus the running partial sums, then back into them or through the epilogue into D:
// act(alpha * v + beta * C + bias).
[[gnu::always_inline]] inline void finish8(__m256 v, int64_t i, int col, int valid, const GemmTile& t) {
  if (valid <= 0) return;
  float* partial = t.partial + i * t.ldp + col;
  if (!t.first) v = _mm256_add_ps(v, load8_f32_or_bf16(partial, false, valid));
  if (!t.last) return store8_f32_or_bf16(partial, false, valid, v);
  const GemmEpilogue& e = *t.last;
  const int64_t es = e.d_bf16 ? 2 : 4;
  v = _mm256_mul_ps(v, _mm256_set1_ps(e.alpha));
  if (e.beta != 0.0f) {
    const char* c = static_cast<const char*>(e.c) + (i * e.ldc + col) * es;
    v = _mm256_fmadd_ps(load8_f32_or_bf16(c, e.d_bf16, valid), _mm256_set1_ps(e.beta), v);
  }
  if (e.bias) v = _mm256_add_ps(v, load8_f32_or_bf16(e.bias + col, false, valid));
  if (e.silu) v = silu_avx2(v);
  store8_f32_or_bf16(static_cast<char*>(e.d) + (i * e.ldd + col) * es, e.d_bf16, valid, v);
}

// A sub-tile's R x 16 f32 sums (rows i0.., columns col0..col0+15) after its K block.
template <int R>
[[gnu::always_inline]] inline void finish_sub(AccF32 (&acc)[R][2], const GemmTile& t, int i0, int col0) {
  const int v0 = vector_cols(t.n, col0 / 8), v1 = vector_cols(t.n, col0 / 8 + 1);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    finish8(__m256(acc[i][0]), i0 + i, col0, v0, t);
    finish8(__m256(acc[i][1]), i0 + i, col0 + 8, v1, t);
  }
}

// The int32 counterpart (int8 tiles): sums exact modulo 2^32, partial sums and D int32, the
// epilogue C (beta 0 or 1) plus the sums.
[[gnu::always_inline]] inline void finish8_s32(__m256i v, int64_t i, int col, int valid, const GemmTile& t) {
  if (valid <= 0) return;
  const __m256i mask = lane_mask(valid);
  const auto load = [&](const int32_t* p) {
    return valid == 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskload_epi32(p, mask);
  };
  const auto store = [&](int32_t* p, __m256i x) {
    if (valid == 8) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
    else _mm256_maskstore_epi32(p, mask, x);
  };
  int32_t* partial = reinterpret_cast<int32_t*>(t.partial) + i * t.ldp + col;
  if (!t.first) v = _mm256_add_epi32(v, load(partial));
  if (!t.last) return store(partial, v);
  const GemmEpilogue& e = *t.last;
  if (e.beta != 0.0f) v = _mm256_add_epi32(v, load(static_cast<const int32_t*>(e.c) + i * e.ldc + col));
  store(static_cast<int32_t*>(e.d) + i * e.ldd + col, v);
}

// The side stream (GemmTile::side): rows interleaved, one line per K step (two for a single
// run longer than the tile's steps), as the AVX-512 tiles walk it; during the lead sub-tile
// only (run_subtiles).
class SideWalk {
 public:
  SideWalk(const GemmTile& t, bool lead)
      : line_(t.side), first_(t.side), rows_(t.side_rows), row_stride_(t.side_row_stride),
        left_(t.side && lead ? t.side_rows * t.side_lines : 0), l2_(t.side_l2),
        two_(t.side_rows == 1 && left_ > t.k_steps) {}
  [[gnu::always_inline]] void step() {
    if (left_ <= 0) return;
    one();
    if (two_ && left_ > 0) one();
  }

 private:
  [[gnu::always_inline]] void one() {
    if (l2_) _mm_prefetch(line_, _MM_HINT_T1);
    else _mm_prefetch(line_, _MM_HINT_T0);
    --left_;
    if (++row_ == rows_) {
      row_ = 0;
      first_ += 64;
      line_ = first_;
    } else {
      line_ += row_stride_;
    }
  }
  const char* line_;
  const char* first_;
  int64_t row_ = 0, rows_, row_stride_, left_;
  bool l2_, two_;
};

// A K step of a B panel is 128 bytes (two lines), requested `ahead` bytes before it is read.
[[gnu::always_inline]] inline void prefetch_b_step(const void* b, int64_t ahead) {
  if (!ahead) return;
  const char* p = static_cast<const char*>(b) + ahead;
  _mm_prefetch(p, _MM_HINT_T0);
  _mm_prefetch(p + 64, _MM_HINT_T0);
}

// K is walked in chunks of kChunkSteps, and every sub-tile of the tile runs each chunk before
// the next: the chunk's panels (f32: 16 KiB of B and 6 KiB of A) are then read from L1 by all
// sub-tiles, where whole-K sub-tiles streamed a long KC's panels from L2 once per sub-tile. The
// sums rest in an L1 array between chunks; each element still sums its K in order.
constexpr int64_t kChunkSteps = 128;

// Where a sub-tile's chunk starts and ends, and the tile's sums between chunks (f32, or int32
// for the int8 tiles, row stride kGemmNR).
struct Chunk {
  int64_t k0 = 0, k1 = 0;
  bool first = true, last = true;
  void* sums = nullptr;
};

// Runs Sub<R>::run(t, i0, col0, lead, chunk, side) over the tile's sub-tiles, chunk by chunk:
// row blocks of balanced_rows(m, kRows), column halves that hold a valid column. The
// lead (first) sub-tile of each chunk is the one that may read B from memory: it alone requests
// B ahead and walks the side stream.
template <template <int> class Sub, int kRows, int... Rs>
void run_subtiles(const GemmTile& t, std::integer_sequence<int, Rs...>) {
  using Fn = void (*)(const GemmTile&, int, int, bool, const Chunk&, SideWalk&);
  static constexpr Fn table[] = {&Sub<Rs + 1>::run...};
  alignas(32) float sums[kGemmMR][kGemmNR];
  SideWalk side(t, true);
  for (int64_t k0 = 0; k0 == 0 || k0 < t.k_steps; k0 += kChunkSteps) {
    const int64_t k1 = t.k_steps - k0 < kChunkSteps ? t.k_steps : k0 + kChunkSteps;
    const Chunk chunk{k0, k1, k0 == 0, k1 >= t.k_steps, sums};
    bool lead = true;
    const int rows = balanced_rows(t.m, kRows);
    for (int col0 = 0; col0 < t.n; col0 += kHalfCols)
      for (int i0 = 0; i0 < t.m; i0 += rows) {
        table[(t.m - i0 < rows ? t.m - i0 : rows) - 1](t, i0, col0, lead, chunk, side);
        lead = false;
      }
  }
}

// A sub-tile's f32 sums in and out of the chunk array.
template <int R>
[[gnu::always_inline]] inline void load_sums(AccF32 (&acc)[R][2], const Chunk& c, int i0, int col0) {
  const float* sums = static_cast<const float*>(c.sums);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 6
    for (int h = 0; h < 2; ++h)
      acc[i][h] = AccF32(c.first ? _mm256_setzero_ps() : _mm256_load_ps(sums + (i0 + i) * kGemmNR + col0 + 8 * h));
}
template <int R>
[[gnu::always_inline]] inline void store_sums(const AccF32 (&acc)[R][2], const Chunk& c, int i0, int col0) {
  float* sums = static_cast<float*>(c.sums);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 6
    for (int h = 0; h < 2; ++h) _mm256_store_ps(sums + (i0 + i) * kGemmNR + col0 + 8 * h, __m256(acc[i][h]));
}

}  // namespace
}  // namespace sol::kernels
