#include "ops/attention/mla_absorbed_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sol/dtype.h"

namespace sol::reference {

namespace {

// Element [i, j, k] of a 3-d bf16 or f32 tensor.
double at(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  const int64_t off = i * t.stride(0) + j * t.stride(1) + k * t.stride(2);
  if (t.dtype() == DType::bf16) return double(bf16_to_f32(t.data_as<const uint16_t>()[off]));
  return double(t.data_as<const float>()[off]);
}

}  // namespace

void mla_decode_absorbed(const Tensor& q, const Tensor& w_uk, const Tensor& latent, const Tensor& w_uv,
                         double softmax_scale, const Tensor& out) {
  const int64_t batch = q.shape(0), heads = q.shape(1), dq = q.shape(2);
  const int64_t dk = w_uk.shape(1), len = latent.shape(1), dv = w_uv.shape(1), dl = w_uv.shape(2);
  std::vector<double> q_lat(static_cast<size_t>(dk)), scores(static_cast<size_t>(len)), o_lat(static_cast<size_t>(dl));
  float* o = out.data_as<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t c = 0; c < dk; ++c) {
        double s = 0;
        for (int64_t d = 0; d < dq; ++d) s += at(q, b, h, d) * at(w_uk, h, c, d);
        q_lat[size_t(c)] = s;
      }
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < len; ++l) {
        double s = 0;
        for (int64_t c = 0; c < dk; ++c) s += q_lat[size_t(c)] * at(latent, b, l, c);
        scores[size_t(l)] = softmax_scale * s;
        top = std::max(top, scores[size_t(l)]);
      }
      double sum = 0;
      for (int64_t l = 0; l < len; ++l) sum += scores[size_t(l)] = std::exp(scores[size_t(l)] - top);
      std::fill(o_lat.begin(), o_lat.end(), 0.0);
      for (int64_t l = 0; l < len; ++l)
        for (int64_t c = 0; c < dl; ++c) o_lat[size_t(c)] += scores[size_t(l)] / sum * at(latent, b, l, c);
      for (int64_t v = 0; v < dv; ++v) {
        double s = 0;
        for (int64_t c = 0; c < dl; ++c) s += o_lat[size_t(c)] * at(w_uv, h, v, c);
        o[(b * heads + h) * dv + v] = float(s);
      }
    }
}

}  // namespace sol::reference
