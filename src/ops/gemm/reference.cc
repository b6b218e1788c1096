#include "ops/gemm/reference.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "sol/error.h"

namespace sol {

namespace {
// Element (i, j) of a 2-D view with a dense last dimension.
double at(const Tensor& t, int64_t i, int64_t j) {
  return load_as_double(t.data(), t.dtype(), size_t(i * t.stride(0) + j));
}
}  // namespace

void reference_gemm(const Tensor& a, const Tensor& b, Layout layout, const Tensor* c, float alpha,
                    float beta, const Tensor* bias, Activation act, const Tensor& out,
                    const Tensor* a_scales, const Tensor* b_scales) {
  check(out.is_contiguous(), "reference_gemm", "out must be contiguous");
  const int64_t m = a.shape(0), k = a.shape(1), n = out.shape(1);
  // B once as exact doubles, column-major ([n][k]), scales applied: the inner loop is then a
  // plain dot product (the element loads dominated the reference's time).
  std::vector<double> bt(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) {
      double y = layout == Layout::nn ? at(b, p, j) : at(b, j, p);
      if (b_scales) y *= at(*b_scales, j / kFp8ScaleBlock, p / kFp8ScaleBlock);
      bt[size_t(j * k + p)] = y;
    }
  parallel_ranges(m, 1, [&](int64_t m0, int64_t m1) {
    std::vector<double> row(static_cast<size_t>(k));
    for (int64_t i = m0; i < m1; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        double x = at(a, i, p);
        if (a_scales) x *= at(*a_scales, i, p / kFp8ScaleBlock);
        row[size_t(p)] = x;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double* y = bt.data() + j * k;
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += row[size_t(p)] * y[p];
        double v = double(alpha) * sum;
        if (beta != 0.0f) v += double(beta) * at(*c, i, j);
        if (bias) v += load_as_double(bias->data(), DType::f32, size_t(j));
        if (act == Activation::silu) v = v / (1.0 + std::exp(-v));
        store_from_double(out.data(), out.dtype(), size_t(i * n + j), v);
      }
    }
  });
}

double gemm_diff_metric(const Tensor& x, const Tensor& y) {
  double xy = 0, sq = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = load_as_double(x.data(), x.dtype(), size_t(i));
    const double b = load_as_double(y.data(), y.dtype(), size_t(i));
    if (std::isfinite(a) && std::isfinite(b)) {
      xy += a * b;
      sq += a * a + b * b;
    }
  }
  return sq > 0 ? 1.0 - 2.0 * xy / sq : 0.0;
}

}  // namespace sol
