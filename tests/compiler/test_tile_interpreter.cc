// The reference interpreter against plain loops: gemm (bf16 tiles, K and M/N edges), a row
// softmax, and masked copies at tensor edges.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/common/fill.h"
#include "sol/tensor.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;

double at(const Tensor& t, int64_t i, int64_t j) {
  return load_as_double(t.data(), t.dtype(), size_t(i * t.stride(0) + j));
}

TEST(TileInterpreter, GemmMatchesPlainLoops) {
  const int64_t m = 150, n = 290, k = 600;
  Buffer a(DType::bf16, {m, k}), b(DType::bf16, {k, n}), c(DType::f32, {m, n});
  fill_random(a, 1, 1.0);
  fill_random(b, 2, 1.0);
  interpret(example("gemm_bf16.tile"), std::vector<Tensor>{a, b, c});
  double err = 0, ref_norm = 0;
  for (int64_t i = 0; i < m; i += 7)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t q = 0; q < k; ++q) ref += at(a, i, q) * at(b, q, j);
      err += (at(c, i, j) - ref) * (at(c, i, j) - ref);
      ref_norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / ref_norm), 1e-6);
}

TEST(TileInterpreter, SoftmaxRowsAndEdges) {
  const int64_t r = 21;  // not a multiple of the 16-row tile: the last tile is masked
  Buffer x(DType::f32, {r, 128}), y(DType::bf16, {r, 128});
  fill_random(x, 3, 4.0);
  interpret(example("softmax_rows.tile"), std::vector<Tensor>{x, y});
  for (int64_t i = 0; i < r; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < 128; ++j) mx = std::max(mx, at(x, i, j));
    for (int64_t j = 0; j < 128; ++j) sum += std::exp(at(x, i, j) - mx);
    for (int64_t j = 0; j < 128; ++j) EXPECT_NEAR(at(y, i, j), std::exp(at(x, i, j) - mx) / sum, 4e-3 * (1 + at(y, i, j)));
  }
}

}  // namespace
}  // namespace sol::tile
