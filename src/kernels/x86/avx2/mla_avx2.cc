// MLA decode's chunk on AVX2: the portable chunk's arithmetic (each row's scores over the
// chunk in full, the maximum with NaN kept, exponentials summed in token order, the values
// accumulated in f32) in blocks that keep the FMA pipes busy. q is widened to f32 once per
// sequence (into the scratch, kept across its chunks: MlaChunk::q_packed) and a page's token
// rows once per page (fp8 codes times their group's scale, exactly as the portable path reads
// them). Scores come in blocks of 3 query rows x 4 tokens (12 eight-lane partial sums over the
// latent dimension, then summed across lanes); P V in blocks of 6 rows x 16 value columns (12
// accumulators, one FMA per probability and vector), the value columns outermost so a block's
// value rows stay in L1 for every query row. exp8 replaces libm's exp, and the sums run in
// other orders, so results are within the tests' tolerance of the portable ones, not their
// bits. Merging chunks and finishing rows stay the portable kernels.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/x86/avx2/codes_avx2.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/subtile_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"
#include "kernels/x86/avx512/mla_chunk_avx512.h"

namespace sol::kernels {

namespace {

constexpr int kChunkTokens = kMlaMaxChunkPages * kMlaPage;

// Token row t of a page as kMlaDk f32 at out.
void widen_token(const uint8_t* row, MlaCacheFormat format, float* out) {
  if (format == MlaCacheFormat::bf16) {
    const auto* p = reinterpret_cast<const uint16_t*>(row);
    for (int d = 0; d < kMlaDk; d += 8) _mm256_storeu_ps(out + d, widen8_bf16(p + d));
    return;
  }
  for (int g = 0; g < kMlaDv / 128; ++g) {
    float scale;
    std::memcpy(&scale, row + 512 + 4 * g, 4);
    const __m256 s = _mm256_set1_ps(scale);
    for (int d = 128 * g; d < 128 * (g + 1); d += 16) {
      __m256 low, high;
      e4m3x16_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d)), low, high);
      _mm256_storeu_ps(out + d, _mm256_mul_ps(low, s));
      _mm256_storeu_ps(out + d + 8, _mm256_mul_ps(high, s));
    }
  }
  const auto* rope = reinterpret_cast<const uint16_t*>(row + 528);
  for (int d = kMlaDv; d < kMlaDk; d += 8) _mm256_storeu_ps(out + d, widen8_bf16(rope + (d - kMlaDv)));
}

float horizontal_sum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// s[r][t] = scale * (q row r . key row t) for R query rows (576 f32 each, kMlaDk apart) and T
// key rows (kMlaDk apart); s rows ld apart.
template <int R, int T>
void qk_block(const float* q, const float* k, float scale, float* s, int64_t ld) {
  AccF32 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = AccF32(_mm256_setzero_ps());
  for (int d = 0; d < kMlaDk; d += 8) {
    __m256 kv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) kv[t] = _mm256_loadu_ps(k + t * kMlaDk + d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 qv = _mm256_loadu_ps(q + r * kMlaDk + d);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = AccF32(_mm256_fmadd_ps(qv, kv[t], __m256(acc[r][t])));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s[r * ld + t] = horizontal_sum(__m256(acc[r][t])) * scale;
}

using QkFn = void (*)(const float*, const float*, float, float*, int64_t);
template <int... I>
constexpr auto qk_table(std::integer_sequence<int, I...>) {
  return std::array<QkFn, sizeof...(I)>{&qk_block<I / 4 + 1, I % 4 + 1>...};
}
constexpr auto kQkBlocks = qk_table(std::make_integer_sequence<int, 12>{});  // [(R - 1) * 4 + T - 1]

// o[r][0..16) += sum over tokens t < n of p[r][t] v[t][0..16), for R rows (o rows kMlaDv apart,
// p rows ld apart, v rows kMlaDk apart).
template <int R>
void pv_block(const float* p, int64_t ld, const float* v, int n, float* o) {
  AccF32 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) acc[r][h] = AccF32(_mm256_loadu_ps(o + r * kMlaDv + 8 * h));
  for (int t = 0; t < n; ++t, v += kMlaDk) {
    const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 pr = _mm256_broadcast_ss(p + r * ld + t);
      acc[r][0] = AccF32(_mm256_fmadd_ps(pr, v0, __m256(acc[r][0])));
      acc[r][1] = AccF32(_mm256_fmadd_ps(pr, v1, __m256(acc[r][1])));
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(o + r * kMlaDv + 8 * h, __m256(acc[r][h]));
}

constexpr void (*kPvBlocks[])(const float*, int64_t, const float*, int, float*) = {
    &pv_block<1>, &pv_block<2>, &pv_block<3>, &pv_block<4>, &pv_block<5>, &pv_block<6>};

float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

}  // namespace

void mla_chunk_avx2(const MlaChunk& c) {
  const int64_t token_bytes = c.format == MlaCacheFormat::bf16 ? 2 * kMlaDk : 656;
  const int tokens = c.npages * kMlaPage;
  const int rows = c.s_q * c.heads;
  // The rows' q widened to f32 (rows x kMlaDk: the scratch's first mla_rows_padded(rows) x 2304
  // bytes), kept while the thread stays on this sequence.
  float* qf = static_cast<float*>(c.scratch);
  if (!c.q_packed)
    for (int i = 0; i < c.s_q; ++i)
      for (int h = 0; h < c.heads; ++h) {
        const uint16_t* q = c.q + i * c.q_stride_s + h * c.q_stride_h;
        float* out = qf + int64_t(i * c.heads + h) * kMlaDk;
        for (int d = 0; d < kMlaDk; d += 8) _mm256_storeu_ps(out + d, widen8_bf16(q + d));
      }
  // Per thread, reused across calls: one page widened, and every row's scores of the chunk.
  thread_local std::vector<float> page_rows, scores;
  page_rows.resize(size_t(kMlaPage) * kMlaDk);
  scores.resize(size_t(rows) * kChunkTokens);
  std::vector<int> visible(static_cast<size_t>(c.s_q));
  int most = 0;
  for (int i = 0; i < c.s_q; ++i) {
    const int64_t seen = c.seqlen - (c.causal ? c.s_q - 1 - i : 0);
    visible[size_t(i)] = int(std::clamp<int64_t>(seen - c.pos0, 0, tokens));
    most = std::max(most, visible[size_t(i)]);
  }
  // Row blocks never span two query positions: a block's rows all see the same tokens (a
  // token a row does not see must not reach its sums, not even times zero: it may hold a NaN).
  const auto for_row_blocks = [&](int height, auto&& f) {
    for (int i = 0; i < c.s_q; ++i)
      for (int h0 = 0; h0 < c.heads; h0 += height) f(i * c.heads + h0, std::min(height, c.heads - h0), visible[size_t(i)]);
  };
  auto widen_page = [&](int page, int count) {
    for (int t = 0; t < count; ++t) widen_token(c.pages[page] + t * token_bytes, c.format, &page_rows[size_t(t) * kMlaDk]);
  };
  // Scores, page by page, in blocks of 4 tokens (outer: their rows stay in L1) by 3 rows.
  for (int page = 0; page * kMlaPage < most; ++page) {
    const int t0 = page * kMlaPage, count = std::min(kMlaPage, most - t0);
    widen_page(page, count);
    for (int tb = 0; tb < count; tb += 4)
      for_row_blocks(3, [&](int m0, int r, int seen) {
        const int n = std::min({4, count - tb, seen - t0 - tb});
        if (n <= 0) return;
        kQkBlocks[size_t((r - 1) * 4 + n - 1)](qf + int64_t(m0) * kMlaDk, &page_rows[size_t(tb) * kMlaDk], c.scale,
                                               &scores[size_t(m0) * kChunkTokens + t0 + tb], kChunkTokens);
      });
  }
  // Each row's maximum, its probabilities (in place of the scores) and their sum in token order.
  for (int i = 0; i < c.s_q; ++i)
    for (int h = 0; h < c.heads; ++h) {
      const int64_t m = int64_t(i) * c.heads + h;
      float* s = &scores[size_t(m) * kChunkTokens];
      const int n = visible[size_t(i)];
      float mx = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < n; ++t) mx = nan_max(mx, s[t]);
      const __m256 mv = _mm256_set1_ps(mx);
      int t = 0;
      for (; t + 8 <= n; t += 8) _mm256_storeu_ps(s + t, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), mv)));
      if (t < n) store8_n(s, DType::f32, t, n - t, exp8(_mm256_sub_ps(load8_n(s, DType::f32, t, n - t), mv)));
      float sum = 0;
      for (int k = 0; k < n; ++k) sum += s[k];
      c.row_max[m] = mx;
      c.row_sum[m] = sum;
      std::fill(c.o + m * kMlaDv, c.o + (m + 1) * kMlaDv, 0.0f);
    }
  // Values, page by page: o[m] += p[m][t] v[t], in blocks of 16 value columns (outer: their
  // token rows stay in L1) by 6 rows.
  for (int page = 0; page * kMlaPage < most; ++page) {
    const int t0 = page * kMlaPage, count = std::min(kMlaPage, most - t0);
    widen_page(page, count);
    for (int d = 0; d < kMlaDv; d += 16)
      for_row_blocks(6, [&](int m0, int r, int seen) {
        const int n = std::min(count, seen - t0);
        if (n <= 0) return;
        kPvBlocks[r - 1](&scores[size_t(m0) * kChunkTokens + t0], kChunkTokens, &page_rows[d], n,
                         c.o + int64_t(m0) * kMlaDv + d);
      });
  }
}

}  // namespace sol::kernels
