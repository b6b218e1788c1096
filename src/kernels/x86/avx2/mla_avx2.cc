// MLA decode's chunk on AVX2: the portable chunk's arithmetic (each row's scores over the
// chunk in full, the maximum with NaN kept, exponentials summed in token order, the values
// accumulated in f32) with the latent dimension in vectors of eight. A page's token rows are
// widened to f32 once (fp8 codes times their group's scale, exactly as the portable path
// reads them) and serve every query row and head, where the portable path widens each row
// once per head. Dot products take four 8-lane partial sums and exp8 replaces libm's exp, so
// results are within the tests' tolerance of the portable ones, not their bits. Merging chunks
// and finishing rows stay the portable kernels (a few operations per output element).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/x86/avx2/codes_avx2.h"
#include "kernels/x86/avx2/exp_avx2.h"
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

// q (bf16, kMlaDk) . k (f32, kMlaDk).
float dot_q(const uint16_t* q, const float* k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int d = 0; d < kMlaDk; d += 32) {
    a0 = _mm256_fmadd_ps(widen8_bf16(q + d), _mm256_loadu_ps(k + d), a0);
    a1 = _mm256_fmadd_ps(widen8_bf16(q + d + 8), _mm256_loadu_ps(k + d + 8), a1);
    a2 = _mm256_fmadd_ps(widen8_bf16(q + d + 16), _mm256_loadu_ps(k + d + 16), a2);
    a3 = _mm256_fmadd_ps(widen8_bf16(q + d + 24), _mm256_loadu_ps(k + d + 24), a3);
  }
  return horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

}  // namespace

void mla_chunk_avx2(const MlaChunk& c) {
  const int64_t token_bytes = c.format == MlaCacheFormat::bf16 ? 2 * kMlaDk : 656;
  const int tokens = c.npages * kMlaPage;
  const int rows = c.s_q * c.heads;
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
  auto query = [&](int i, int h) { return c.q + i * c.q_stride_s + h * c.q_stride_h; };
  auto widen_page = [&](int page, int count) {
    for (int t = 0; t < count; ++t) widen_token(c.pages[page] + t * token_bytes, c.format, &page_rows[size_t(t) * kMlaDk]);
  };
  // Scores, page by page.
  for (int page = 0; page * kMlaPage < most; ++page) {
    const int t0 = page * kMlaPage, count = std::min(kMlaPage, most - t0);
    widen_page(page, count);
    for (int i = 0; i < c.s_q; ++i)
      for (int h = 0; h < c.heads; ++h) {
        float* s = &scores[size_t(i * c.heads + h) * kChunkTokens];
        const int end = std::min(count, visible[size_t(i)] - t0);
        for (int t = 0; t < end; ++t) s[t0 + t] = dot_q(query(i, h), &page_rows[size_t(t) * kMlaDk]) * c.scale;
      }
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
  // Values, page by page: o[m] += p[m][t] v[t].
  for (int page = 0; page * kMlaPage < most; ++page) {
    const int t0 = page * kMlaPage, count = std::min(kMlaPage, most - t0);
    widen_page(page, count);
    for (int i = 0; i < c.s_q; ++i)
      for (int h = 0; h < c.heads; ++h) {
        const int64_t m = int64_t(i) * c.heads + h;
        const float* p = &scores[size_t(m) * kChunkTokens];
        float* o = c.o + m * kMlaDv;
        const int end = std::min(count, visible[size_t(i)] - t0);
        for (int t = 0; t < end; ++t) {
          const __m256 pv = _mm256_set1_ps(p[t0 + t]);
          const float* v = &page_rows[size_t(t) * kMlaDk];
          for (int d = 0; d < kMlaDv; d += 8)
            _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(o + d)));
        }
      }
  }
}

}  // namespace sol::kernels
