// Flash-attention tile primitives in plain C++: the SOL_ISA=scalar (and avx2) path, and the
// definition of what the AVX-512 versions compute.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "sol/dtype.h"

namespace sol::kernels {

namespace {

float bf16_at(const void* p, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); }

void finish(const AttnGemmTile& t, const float (&acc)[kAttnTileRows][kAttnPanel]) {
  for (int i = 0; i < t.m; ++i)
    for (int j = 0; j < t.n; ++j) {
      float* c = t.c + i * t.ldc + j;
      *c = t.accumulate ? *c * (t.row_scale ? t.row_scale[i] : 1.0f) + acc[i][j] : acc[i][j];
    }
}

// Stores v as f32 or (rounded to nearest even) bf16 and returns the stored value.
// bf16: rounded, stored as bf16 or (widened) as the f32 of that bf16; returns what was kept.
float store(void* p, int64_t i, bool bf16, bool widened, float v) {
  if (!bf16) {
    static_cast<float*>(p)[i] = v;
    return v;
  }
  const uint16_t b = f32_to_bf16(v);
  const float kept = bf16_to_f32(b);
  if (widened) static_cast<float*>(p)[i] = kept;
  else static_cast<uint16_t*>(p)[i] = b;
  return kept;
}

}  // namespace

void attn_store_rows_scalar(const AttnStoreRows& r) {
  for (int64_t i = 0; i < r.m; ++i) {
    const float s = (r.row_scale ? r.row_scale[i] : 1.0f) * r.scale;
    for (int64_t d = 0; d < r.n; ++d) store(r.out, i * r.ldo + d, r.bf16, false, r.acc[i * r.lda + d] * s);
  }
}

void attn_gemm_tile_f32_scalar(const AttnGemmTile& t) {
  float acc[kAttnTileRows][kAttnPanel] = {};
  const float* a = static_cast<const float*>(t.a);
  const float* b = static_cast<const float*>(t.b);
  for (int64_t k = 0; k < t.k_steps; ++k)
    for (int i = 0; i < t.m; ++i) {
      const float x = a[i * t.lda + k];
      for (int j = 0; j < kAttnPanel; ++j) acc[i][j] = std::fma(x, b[k * kAttnPanel + j], acc[i][j]);
    }
  finish(t, acc);
}

void attn_gemm_tile_bf16_scalar(const AttnGemmTile& t) {
  float acc[kAttnTileRows][kAttnPanel] = {};
  for (int64_t k = 0; k < t.k_steps; ++k)
    for (int i = 0; i < t.m; ++i) {
      const float x0 = bf16_at(t.a, i * t.lda + 2 * k), x1 = bf16_at(t.a, i * t.lda + 2 * k + 1);
      for (int j = 0; j < kAttnPanel; ++j) {
        const int64_t at = (k * kAttnPanel + j) * 2;
        acc[i][j] += x0 * bf16_at(t.b, at) + x1 * bf16_at(t.b, at + 1);
      }
    }
  finish(t, acc);
}

void attn_softmax_rows_scalar(const AttnSoftmaxRows& r) {
  for (int i = 0; i < r.m; ++i) {
    const float* s = r.s + i * r.lds;
    const int lo = std::clamp(r.lo[i], 0, r.n), hi = std::clamp(r.hi[i], lo, r.n);
    float mx = -INFINITY;
    bool nan = false;
    for (int j = lo; j < hi; ++j) {
      mx = std::max(mx, s[j]);
      nan |= std::isnan(s[j]);
    }
    const float old = r.row_max[i];
    // A NaN score makes the running maximum NaN, and with it every later P and the row's sum.
    const float now = nan ? NAN : hi > lo ? std::max(old, mx * r.scale) : old;
    const int64_t row = i * r.ldp;
    if (now == -INFINITY) {  // nothing seen yet: the output row is still all zeros
      r.alpha[i] = 1.0f;
      for (int j = 0; j < r.n; ++j) store(r.p, row + j, r.p_bf16, r.p_widened, 0.0f);
      continue;
    }
    r.alpha[i] = std::exp(old - now);
    float sum = 0;
    for (int j = 0; j < r.n; ++j) {
      const float e = j >= lo && j < hi ? std::exp(std::fma(s[j], r.scale, -now)) : 0.0f;
      sum += store(r.p, row + j, r.p_bf16, r.p_widened, e);
    }
    r.row_max[i] = now;
    r.row_sum[i] = r.row_sum[i] * r.alpha[i] + sum;
  }
}

void attn_grad_rows_scalar(const AttnGradRows& r) {
  for (int i = 0; i < r.m; ++i) {
    const int lo = std::clamp(r.lo[i], 0, r.n), hi = std::clamp(r.hi[i], lo, r.n);
    for (int j = 0; j < r.n; ++j) {
      float p = 0, ds = 0;
      if (j >= lo && j < hi) {
        const int64_t at = i * r.ld + j;
        const float lse = r.per_column ? r.lse[j] : r.lse[i];
        const float delta = r.per_column ? r.delta[j] : r.delta[i];
        p = std::exp(std::fma(r.s[at], r.scale, -lse));
        ds = p * (r.dp[at] - delta);
      }
      if (r.p) store(r.p, i * r.ldo + j, r.out_bf16, r.out_widened, p);
      store(r.ds, i * r.ldo + j, r.out_bf16, r.out_widened, ds);
    }
  }
}

}  // namespace sol::kernels
