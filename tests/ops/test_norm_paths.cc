// The AVX-512 norm kernels against the scalar ones, bit for bit: both sum in the same 64 partial
// sums (bf16 rows in the even/odd order of the vector widening, kernels/norm.h) and round the
// same way, for every fusion and every mix of f32 and bf16, over row lengths that leave partial
// blocks of 64 and 32, and with subnormal results (the hardware bf16 conversion's guard).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/common/fill.h"
#include "sol/hw.h"
#include "sol/norm.h"

namespace sol {
namespace {

bool same_bytes(const Buffer& a, const Buffer& b) {
  return std::memcmp(a.data(), b.data(), size_t(a.tensor().nbytes())) == 0;
}

template <class Run>
void expect_paths_agree(Run&& run, const char* what) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path on this CPU";
  for (DType xt : {DType::bf16, DType::f32})
    for (DType yt : {DType::bf16, DType::f32})
      for (int64_t h : {1, 31, 33, 64, 95, 1531, 7168}) {
        const int64_t rows = 3;
        setenv("SOL_ISA", "scalar", 1);
        auto a = run(xt, yt, rows, h);
        setenv("SOL_ISA", "avx512", 1);
        auto b = run(xt, yt, rows, h);
        unsetenv("SOL_ISA");
        for (size_t k = 0; k < a.size(); ++k)
          EXPECT_TRUE(same_bytes(a[k], b[k])) << what << " " << dtype_name(xt) << " -> " << dtype_name(yt) << " h=" << h
                                              << " output " << k;
      }
}

// Rows of random values; in the second row every third value is tiny, so that its results are
// subnormal (those lanes need the integer bf16 rounding).
Buffer input(DType t, int64_t rows, int64_t h, uint64_t seed) {
  Buffer x(t, {rows, h});
  fill_random(x, seed, 3.0);
  for (int64_t c = 0; c < h; c += 3) {
    const double v = load_as_double(x.data(), t, size_t(h + c));
    store_from_double(x.data(), t, size_t(h + c), v * 1e-39);
  }
  return x;
}

TEST(NormPaths, RmsNormScalarAndVectorAgree) {
  expect_paths_agree(
      [](DType xt, DType yt, int64_t rows, int64_t h) {
        Buffer x = input(xt, rows, h, 1), w(DType::bf16, {h});
        fill_random(w, 2, 2.0);
        std::vector<Buffer> out;
        out.emplace_back(yt, std::initializer_list<int64_t>{rows, h});
        rmsnorm(x, w, out[0]);
        return out;
      },
      "rmsnorm");
}

TEST(NormPaths, AddRmsNormScalarAndVectorAgree) {
  expect_paths_agree(
      [](DType xt, DType rt, int64_t rows, int64_t h) {
        Buffer x = input(xt, rows, h, 3), w(DType::f32, {h});
        fill_random(w, 4, 2.0);
        std::vector<Buffer> out;
        out.emplace_back(input(rt, rows, h, 5));  // the residual, updated in place
        out.emplace_back(DType::bf16, std::initializer_list<int64_t>{rows, h});
        add_rmsnorm(x, out[0], w, out[1]);
        return out;
      },
      "add_rmsnorm");
}

TEST(NormPaths, LayerNormScalarAndVectorAgree) {
  expect_paths_agree(
      [](DType xt, DType yt, int64_t rows, int64_t h) {
        Buffer x = input(xt, rows, h, 6), w(DType::bf16, {h}), b(DType::bf16, {h});
        fill_random(w, 7, 2.0);
        fill_random(b, 8, 1.0);
        std::vector<Buffer> out;
        out.emplace_back(yt, std::initializer_list<int64_t>{rows, h});
        layernorm(x, w, &b.tensor(), out[0]);
        return out;
      },
      "layernorm");
}

}  // namespace
}  // namespace sol
