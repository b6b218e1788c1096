// MLA decode, portable path: each query row on its own, f32 sums, the chunk's scores in full
// (no online rescaling inside a chunk). Slow but plain; SOL_ISA=scalar runs it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/x86/avx512/mla_chunk_avx512.h"
#include "kernels/x86/mla_rows.h"
#include "sol/dtype.h"

namespace sol::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Latent dim d of one token as f32, in either cache format.
struct TokenRow {
  const uint8_t* p;
  MlaCacheFormat format;
  float dim(int d) const {
    if (format == MlaCacheFormat::bf16) {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * d, 2);
      return bf16_to_f32(bits);
    }
    if (d >= kMlaDv) {
      uint16_t bits;
      std::memcpy(&bits, p + 528 + 2 * (d - kMlaDv), 2);
      return bf16_to_f32(bits);
    }
    float scale;
    std::memcpy(&scale, p + 512 + 4 * (d / 128), 4);
    return e4m3_to_f32(p[d]) * scale;
  }
};

float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

}  // namespace

void mla_chunk_scalar(const MlaChunk& c) {
  const int64_t token_bytes = c.format == MlaCacheFormat::bf16 ? 2 * kMlaDk : 656;
  const int tokens = c.npages * kMlaPage;
  float scores[kMlaMaxChunkPages * kMlaPage];
  float qf[kMlaDk];
  for (int i = 0; i < c.s_q; ++i) {
    const int64_t visible = c.seqlen - (c.causal ? c.s_q - 1 - i : 0);
    const int n = int(std::clamp<int64_t>(visible - c.pos0, 0, tokens));
    for (int h = 0; h < c.heads; ++h) {
      const int64_t m = int64_t(i) * c.heads + h;
      const uint16_t* q = c.q + i * c.q_stride_s + h * c.q_stride_h;
      for (int d = 0; d < kMlaDk; ++d) qf[d] = bf16_to_f32(q[d]);
      float mx = kNegInf;
      for (int t = 0; t < n; ++t) {
        const TokenRow k{c.pages[t / kMlaPage] + (t % kMlaPage) * token_bytes, c.format};
        float s = 0;
        for (int d = 0; d < kMlaDk; ++d) s += qf[d] * k.dim(d);
        scores[t] = s * c.scale;
        mx = nan_max(mx, scores[t]);
      }
      float* o = c.o + m * kMlaDv;
      std::fill(o, o + kMlaDv, 0.0f);
      float sum = 0;
      for (int t = 0; t < n; ++t) {
        const float p = std::exp(scores[t] - mx);
        sum += p;
        const TokenRow v{c.pages[t / kMlaPage] + (t % kMlaPage) * token_bytes, c.format};
        for (int d = 0; d < kMlaDv; ++d) o[d] += p * v.dim(d);
      }
      c.row_max[m] = mx;
      c.row_sum[m] = sum;
    }
  }
}

void mla_merge_scalar(int64_t rows, float* o, float* row_max, float* row_sum, const float* o2,
                      const float* row_max2, const float* row_sum2) {
  merge_rows(rows, o, row_max, row_sum, o2, row_max2, row_sum2, [](float* x, const float* y, float a, float b) {
    for (int d = 0; d < kMlaDv; ++d) x[d] = x[d] * a + y[d] * b;
  });
}

void mla_finish_scalar(const MlaFinish& f) {
  finish_rows(f, [](uint16_t* out, const float* o, float inv_sum) {
    for (int d = 0; d < kMlaDv; ++d) out[d] = f32_to_bf16(o[d] * inv_sum);
  });
}

}  // namespace sol::kernels
