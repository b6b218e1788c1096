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

}  // namespace sol::reference
