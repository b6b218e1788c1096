// The activation row kernels run 32 elements per step (a bf16 line split into even and odd
// elements, or two f32 vectors) with masked 16-lane steps at the unaligned head and the tail.
// Every dtype pairing, row lengths around the step, outputs off a 64-byte line and outputs
// large enough to stream must give each element the fp64 value to f32 accuracy, and each bf16
// output must be within 1 ulp of the correctly rounded fp64 value (silu-mul and gelu compute
// bf16 outputs with cheaper kernels of their own, so they are not the rounding of the f32
// output; the scalar path's are, which the rule includes).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/bf16_ulps.h"
#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/stream_threshold.h"
#include "sol/activation.h"
#include "sol/hw.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

double value(const Tensor& t, int64_t r, int64_t c) {
  const int64_t i = r * t.stride(0) + c;
  return t.dtype() == DType::bf16 ? bf16_to_f32(t.data_as<uint16_t>()[i]) : t.data_as<float>()[i];
}

struct Case {
  const char* name;
  int64_t in_cols;                                          // columns of x per output column
  std::function<void(const Tensor&, const Tensor&)> op;     // op(x, y)
  std::function<double(const Tensor&, int64_t, int64_t)> ref;  // fp64 value of y[r][c]
  double tol;  // relative, f32 output: 1e-6 for silu; gelu as its own test (tests/ops/test_silu_mul.cc)
  bool bf16_within_ulp_of_fp64 = false;  // else bf16 output = f32_to_bf16(f32 output), bit for bit
};

// y f32 [rows, n] against ref element by element; y bf16 [rows, n] (a view `offset` elements
// into rows of n + y_pad) against f32_to_bf16 of the f32 output (or the rounded ref, 1 ulp). x: rows of in_cols * n + x_pad
// elements, of which the op sees the first in_cols * n (a row stride larger than the row).
void expect_paths_agree(const Case& k, DType in, int64_t rows, int64_t n, int64_t offset, int64_t x_pad = 0,
                        int64_t y_pad = 8) {
  SCOPED_TRACE(std::string(k.name) + " in " + std::string(dtype_name(in)) + " n " + std::to_string(n) +
               " offset " + std::to_string(offset) + " rows " + std::to_string(rows) + " x_pad " +
               std::to_string(x_pad) + " y_pad " + std::to_string(y_pad));
  Buffer xb(in, {rows, k.in_cols * n + x_pad});
  fill_random(xb, uint64_t(n * 7 + offset + rows), 6.0);
  if (in == DType::f32) {  // values bf16 cannot hold: the f32 loads must not truncate
    float* p = xb.tensor().data_as<float>();
    for (int64_t i = 0; i < xb.tensor().numel(); i += 3) p[i] *= 1.0f + 0x1p-20f;
  }
  const Tensor x = xb.tensor().slice(1, 0, k.in_cols * n);
  Buffer y32(DType::f32, {rows, n}), y16(DType::bf16, {rows, n + y_pad});
  poison(y32);
  poison(y16);
  k.op(x, y32);
  const Tensor view = y16.tensor().slice(1, offset, offset + n);
  k.op(x, view);
  int64_t far = 0, unrounded = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const double want = k.ref(x, r, c);
      const float got = y32.tensor().data_as<float>()[r * n + c];
      if (!(std::fabs(got - want) <= k.tol * std::fabs(want) + 1e-37) && far++ < 5)
        ADD_FAILURE() << "f32 y[" << r << "][" << c << "] = " << got << ", fp64 " << want;
      const uint16_t bits = y16.tensor().data_as<uint16_t>()[r * (n + y_pad) + offset + c];
      const uint16_t expect = k.bf16_within_ulp_of_fp64 ? testing_bf16::bf16_rounded(want) : f32_to_bf16(got);
      const bool bad = k.bf16_within_ulp_of_fp64 ? testing_bf16::bf16_ulps_apart(bits, expect) > 1 : bits != expect;
      if (bad && unrounded++ < 5)
        ADD_FAILURE() << "bf16 y[" << r << "][" << c << "] = 0x" << std::hex << bits << ", expected 0x" << expect
                      << (k.bf16_within_ulp_of_fp64 ? " (1 ulp allowed)" : "");
    }
  EXPECT_EQ(far, 0);
  EXPECT_EQ(unrounded, 0);
}

std::vector<Case> cases() {
  auto silu = [](const Tensor& x, int64_t r, int64_t c) {
    const int64_t n = x.shape(1) / 2;
    const double g = value(x, r, c), u = value(x, r, n + c);
    return g / (1 + std::exp(-g)) * u;
  };
  auto gelu_tanh = [](const Tensor& x, int64_t r, int64_t c) {
    const double v = value(x, r, c);
    return v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  auto gelu_erf = [](const Tensor& x, int64_t r, int64_t c) {
    const double v = value(x, r, c);
    return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
  };
  return {
      {"silu_mul", 2, [](const Tensor& x, const Tensor& y) { silu_mul(x, y); }, silu, 1e-6, true},
      {"gelu tanh", 1, [](const Tensor& x, const Tensor& y) { gelu(x, y, GeluForm::tanh); }, gelu_tanh, 1e-5, true},
      {"gelu erf", 1, [](const Tensor& x, const Tensor& y) { gelu(x, y, GeluForm::erf); }, gelu_erf, 1e-5, true},
  };
}

TEST(ActivationPaths, EveryDtypePairingLengthAndAlignment) {
  for_each_isa([] {
    for (const Case& k : cases())
      for (DType in : {DType::f32, DType::bf16})
        for (int64_t n : {1, 15, 16, 31, 32, 33, 47, 63, 64, 65, 100, 1031})
          for (int64_t offset : {0, 1, 7}) expect_paths_agree(k, in, 3, n, offset);
  });
}

// Outputs past the streaming threshold (lowered: ops/stream_threshold.h) are written with
// non-temporal stores in the 32-wide loop.
TEST(ActivationPaths, StreamedOutputsFromF32Inputs) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path";
  const testing_stream::LowStreamThreshold low;
  const int64_t n = 999, rows = testing_stream::kStreamBytes / (2 * n) + 3;
  for (const Case& k : cases())
    for (int64_t offset : {0, 1}) expect_paths_agree(k, DType::f32, rows, n, offset);
}

// The AVX-512 drivers take two rows per call (row r with the row half the thread's range away,
// pair_avx512.h map_two_rows_pairs) and the odd last row alone: every row count around the
// pairing, input rows with a stride, for each input dtype.
TEST(ActivationPaths, TwoRowsPerCallEveryRowCount) {
  for_each_isa([] {
    for (const Case& k : cases())
      for (DType in : {DType::f32, DType::bf16})
        for (int64_t rows : {1, 2, 3, 4, 7, 16})
          for (int64_t x_pad : {0, 5}) expect_paths_agree(k, in, rows, 77, 1, x_pad);
  });
}

// Streamed outputs whose rows all start at the same offset in a line take the paired loop with
// non-temporal stores (offset 0: no head; offset 16: a 16-element head in both rows); rows at
// different offsets (y_pad 8) take two one-row calls.
TEST(ActivationPaths, TwoRowsPerCallStreamed) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path";
  const testing_stream::LowStreamThreshold low;
  const int64_t n = 1024, rows = testing_stream::kStreamBytes / (2 * (n - 32)) + 5;  // every bf16 output streams
  for (const Case& k : cases())
    for (DType in : {DType::f32, DType::bf16}) {
      expect_paths_agree(k, in, rows, n, 0, 0, 0);
      expect_paths_agree(k, in, rows, n - 32, 16, 0, 32);
      expect_paths_agree(k, in, rows, n, 3, 0, 8);
    }
}

TEST(ActivationPaths, NaNAndInfinitiesStayWhereTheyBelong) {
  for_each_isa([] {
    for (DType in : {DType::f32, DType::bf16}) {
      const float v[] = {NAN, INFINITY, -INFINITY, -200.0f, 200.0f, -0.0f};
      const int64_t n = 64;  // one 32-wide step holds every special value, the rest are plain
      Buffer x(in, {1, n}), gu(in, {1, 2 * n}), y(DType::f32, {1, n}), ys(DType::f32, {1, n});
      fill_random(x, 5, 3.0);
      fill_random(gu, 6, 3.0);
      for (int i = 0; i < 6; ++i) {
        if (in == DType::f32) x.tensor().data_as<float>()[3 + 5 * i] = v[i], gu.tensor().data_as<float>()[3 + 5 * i] = v[i];
        else x.tensor().data_as<uint16_t>()[3 + 5 * i] = f32_to_bf16(v[i]), gu.tensor().data_as<uint16_t>()[3 + 5 * i] = f32_to_bf16(v[i]);
      }
      for (GeluForm form : {GeluForm::tanh, GeluForm::erf}) {
        gelu(x, y, form);
        const float* o = y.tensor().data_as<float>();
        EXPECT_TRUE(std::isnan(o[3]));
        EXPECT_EQ(o[8], INFINITY);   // gelu(inf) = inf
        EXPECT_EQ(o[18], -0.0f);     // gelu(-200): the limit, not NaN
        EXPECT_EQ(o[23], 200.0f);
        for (int64_t c = 0; c < n; ++c)
          if (c != 3 && c != 13) {  // 13: -inf * Phi(-inf) = -inf * 0 (and -inf / inf in the tanh form)
            EXPECT_FALSE(std::isnan(o[c])) << c;
          }
      }
      silu_mul(gu, ys);
      const float* o = ys.tensor().data_as<float>();
      EXPECT_TRUE(std::isnan(o[3]));
      EXPECT_EQ(o[18], 0.0f);  // silu(-200) * u: -0 times u's sign
      for (int64_t c = 0; c < n; ++c)
        if (c != 3 && c != 13) {  // 13: -inf / inf
          EXPECT_FALSE(std::isnan(o[c])) << c;
        }
    }
  });
}

}  // namespace
}  // namespace sol
