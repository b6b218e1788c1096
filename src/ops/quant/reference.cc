#include "ops/quant/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace sol::reference {

namespace {

float element(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::bf16) return bf16_to_f32(t.data_as<const uint16_t>()[i]);
  return t.data_as<const float>()[i];
}

// amax of a set of values with the documented rule: NaN wins, then the 1e-4 floor.
struct Amax {
  bool nan = false;
  float value = 0.0f;
  void add(float v) {
    if (std::isnan(v)) nan = true;
    else value = std::max(value, std::fabs(v));
  }
  float result() const {
    if (nan) return std::numeric_limits<float>::quiet_NaN();
    return std::max(value, 1e-4f);
  }
};

// Scale and multiplier by the definition, written independently of the fast path: the UE8M0
// exponent from log2 in double precision rather than from the float's bits.
void scale_and_multiplier(float amax, ScaleFormat f, float& scale, float& mult) {
  float t = amax / 448.0f;
  if (f == ScaleFormat::f32 || !std::isfinite(t)) {
    scale = t;
    mult = 448.0f / amax;
    return;
  }
  scale = float(std::ldexp(1.0, int(std::ceil(std::log2(double(t))))));
  mult = 1.0f / scale;
}

}  // namespace

void quant_fp8_per_token(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const int64_t rows = x.shape(0), cols = x.shape(1), g = opt.group;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += g) {
      Amax a;
      for (int64_t c = c0; c < c0 + g; ++c) a.add(element(x, r * cols + c));
      float s, m;
      scale_and_multiplier(a.result(), opt.scale, s, m);
      scales.data_as<float>()[r * (cols / g) + c0 / g] = s;
      for (int64_t c = c0; c < c0 + g; ++c)
        q.data_as<uint8_t>()[r * cols + c] = f32_to_e4m3(element(x, r * cols + c) * m);
    }
}

void quant_fp8_per_block(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const int64_t rows = w.shape(0), cols = w.shape(1), b = 128;
  for (int64_t r0 = 0; r0 < rows; r0 += b)
    for (int64_t c0 = 0; c0 < cols; c0 += b) {
      const int64_t r1 = std::min(rows, r0 + b);
      Amax a;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c0 + b; ++c) a.add(element(w, r * cols + c));
      float s, m;
      scale_and_multiplier(a.result(), opt.scale, s, m);
      scales.data_as<float>()[(r0 / b) * (cols / b) + c0 / b] = s;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c0 + b; ++c)
          q.data_as<uint8_t>()[r * cols + c] = f32_to_e4m3(element(w, r * cols + c) * m);
    }
}

void dequant_fp8_per_token(const Tensor& q, const Tensor& scales, const Tensor& y, const QuantOptions& opt) {
  const int64_t rows = q.shape(0), cols = q.shape(1), g = opt.group;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = e4m3_to_f32(q.data_as<const uint8_t>()[r * cols + c]) *
                scales.data_as<const float>()[r * (cols / g) + c / g];
      if (y.dtype() == DType::bf16) y.data_as<uint16_t>()[r * cols + c] = f32_to_bf16(v);
      else y.data_as<float>()[r * cols + c] = v;
    }
}

}  // namespace sol::reference
