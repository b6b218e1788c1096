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
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/quant.h"

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

TEST(NormPaths, FusedQuantBadInputIsNamedBeforeAnyWork) {
  // Checked up front: the row loop runs in a parallel region, where a throw would terminate.
  Buffer x(DType::bf16, {4, 256}), w(DType::bf16, {256}), q(DType::f8e4m3, {4, 256});
  Buffer s(DType::f32, {4, 2}), wide(DType::f32, {4, 4});
  auto message = [&](const Tensor& scales, QuantOptions qopt) {
    try {
      rmsnorm_quant_fp8(x, w, q, scales, {}, qopt);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(s, {100, ScaleFormat::f32}).find("group = 100"), std::string::npos);
  const int64_t shape[2] = {4, 2}, strides[2] = {4, 2};  // every other column of `wide`
  Tensor strided(wide.data(), DType::f32, shape, strides);
  EXPECT_NE(message(strided, {}).find("scales rows must be dense"), std::string::npos);
  Tensor overlapping(q.data(), DType::f32, {4, 2});
  EXPECT_NE(message(overlapping, {}).find("overlap"), std::string::npos) << message(overlapping, {});
}

}  // namespace
}  // namespace sol
