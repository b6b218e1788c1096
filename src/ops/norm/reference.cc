#include "ops/norm/reference.h"

#include <cmath>

namespace sol::reference {

void rmsnorm(const Tensor& x, const Tensor& weight, const Tensor& y, double eps) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < h; ++c) {
      double v = load_as_double(x.data(), x.dtype(), size_t(r * h + c));
      ss += v * v;
    }
    double inv = 1.0 / std::sqrt(ss / double(h) + eps);
    for (int64_t c = 0; c < h; ++c)
      store_from_double(y.data(), y.dtype(), size_t(r * h + c),
                        load_as_double(x.data(), x.dtype(), size_t(r * h + c)) * inv *
                            load_as_double(weight.data(), weight.dtype(), size_t(c)));
  }
}

void layernorm(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y, double eps) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  auto at = [&](int64_t r, int64_t c) { return load_as_double(x.data(), x.dtype(), size_t(r * h + c)); };
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < h; ++c) mean += at(r, c);
    mean /= double(h);
    for (int64_t c = 0; c < h; ++c) var += (at(r, c) - mean) * (at(r, c) - mean);
    const double inv = 1.0 / std::sqrt(var / double(h) + eps);
    for (int64_t c = 0; c < h; ++c) {
      double v = (at(r, c) - mean) * inv * load_as_double(weight.data(), weight.dtype(), size_t(c));
      if (bias) v += load_as_double(bias->data(), bias->dtype(), size_t(c));
      store_from_double(y.data(), y.dtype(), size_t(r * h + c), v);
    }
  }
}

}  // namespace sol::reference
