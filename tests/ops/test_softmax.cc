#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/softmax.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

TEST(Softmax, MasksNaNAndInfinityRows) {
  for_each_isa([] {
    const int64_t n = 37;
    Buffer x(DType::f32, {4, n}), y(DType::f32, {4, n});
    fill_random(x, 2, 5.0);
    float* p = x.tensor().data_as<float>();
    for (int64_t i = 0; i < n; i += 2) p[i] = -INFINITY;  // row 0: half masked
    p[n + 5] = NAN;                                        // row 1: NaN
    p[2 * n + 7] = INFINITY;                               // row 2: +inf
    softmax(x, y);
    const float* q = y.tensor().data_as<float>();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        EXPECT_EQ(q[i], 0.0f);
      }
      sum += q[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[n + i]));
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[2 * n + i]));
    sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += q[3 * n + i];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  });
}

// The AVX-512 row runs 32 elements per step (bf16: even / odd halves of a line) with masked
// 16-lane tails: every input dtype, lengths around the step, outputs off a 64-byte line and
// outputs large enough to stream must give the fp64 softmax to f32 accuracy, and a bf16 output
// the rounding of the f32 output bit for bit.
TEST(Softmax, EveryDtypeLengthAndAlignmentMatchesFp64) {
  for_each_isa([] {
    for (DType in : {DType::f32, DType::bf16})
      for (int64_t n : {1, 15, 31, 32, 33, 64, 100, 1031, 999}) {
        const int64_t llc = cpu_features().l3_bytes > 0 ? cpu_features().l3_bytes : (16L << 20);
        const int64_t rows = n == 999 && active_isa() >= Isa::avx512 ? llc / 2 / (2 * n) + 3 : 3;
        Buffer x(in, {rows, n}), y32(DType::f32, {rows, n}), y16(DType::bf16, {rows * n + 1});
        fill_random(x, uint64_t(n), 12.0);
        poison(y32);
        poison(y16);
        softmax(x, y32);
        for (int64_t offset : {0, 1}) {
          Tensor view(y16.tensor().data_as<uint16_t>() + offset, DType::bf16, {rows, n});
          softmax(x, view);
          int64_t unrounded = 0;
          for (int64_t i = 0; i < rows * n; ++i)
            unrounded += view.data_as<uint16_t>()[i] != f32_to_bf16(y32.tensor().data_as<float>()[i]);
          EXPECT_EQ(unrounded, 0) << dtype_name(in) << " n " << n << " offset " << offset;
        }
        int64_t far = 0;
        for (int64_t r = 0; r < std::min<int64_t>(rows, 5); ++r) {
          auto xv = [&](int64_t c) -> double {
            const int64_t i = r * n + c;
            return in == DType::bf16 ? bf16_to_f32(x.tensor().data_as<uint16_t>()[i]) : x.tensor().data_as<float>()[i];
          };
          double mx = -INFINITY, sum = 0;
          for (int64_t c = 0; c < n; ++c) mx = std::max(mx, xv(c));
          for (int64_t c = 0; c < n; ++c) sum += std::exp(xv(c) - mx);
          for (int64_t c = 0; c < n; ++c) {
            const double want = std::exp(xv(c) - mx) / sum, got = y32.tensor().data_as<float>()[r * n + c];
            far += !(std::fabs(got - want) <= 2e-6 * want + 1e-30);
          }
        }
        EXPECT_EQ(far, 0) << dtype_name(in) << " n " << n;
      }
  });
}

TEST(Softmax, InPlaceAndHigherRank) {
  Buffer x(DType::bf16, {2, 3, 100}), y(DType::bf16, {2, 3, 100});
  fill_random(x, 5);
  softmax(x, y);
  softmax(x, x);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), size_t(x.tensor().nbytes())), 0);
}

// Out of place, bf16 input runs the pipelined AVX-512 kernel from 32 rows per thread on (row
// r's exponentials beside row r - 1's stores and row r + 1's maximum); in place runs one row
// per call. Both must give the
// same bits for every row count (first, middle and last stages), lengths with tails, outputs
// off a line, and streamed outputs.
TEST(Softmax, PipelinedRowsMatchOneRowAtATime) {
  for_each_isa([] {
    const int64_t llc = cpu_features().l3_bytes > 0 ? cpu_features().l3_bytes : (16L << 20);
    for (DType in : {DType::bf16, DType::f32})
      for (int64_t n : {33, 64, 1031, 1024})
        for (int64_t rows : {int64_t(1), int64_t(2), int64_t(31), int64_t(32), int64_t(33), int64_t(67),
                             n == 1024 ? llc / 2 / (2 * n) + 3 : 5})
          for (int64_t offset : {0, 1}) {
            const int64_t es = int64_t(dtype_size(in));
            Buffer x(in, {rows, n}), ybuf(in, {rows * n + 1}), ref(in, {rows * n + 1});
            fill_random(x, uint64_t(n + rows), 12.0);
            poison(ybuf);
            Tensor y(ybuf.tensor().data_as<char>() + offset * es, in, {rows, n});
            Tensor in_place(ref.tensor().data_as<char>() + offset * es, in, {rows, n});
            std::memcpy(in_place.data(), x.data(), size_t(rows * n * es));
            softmax(x, y);
            softmax(in_place, in_place);
            EXPECT_EQ(std::memcmp(y.data(), in_place.data(), size_t(rows * n * es)), 0)
                << dtype_name(in) << " n " << n << " rows " << rows << " offset " << offset;
          }
  });
}

TEST(Softmax, BadInputIsNamed) {
  Buffer x(DType::f32, {4, 8}), y(DType::f32, {4, 9}), yi(DType::i32, {4, 8});
  EXPECT_THROW(softmax(x, y), Error);
  EXPECT_THROW(softmax(x, yi), Error);
  EXPECT_THROW(softmax(x.tensor().slice(1, 0, 4), Buffer(DType::f32, {4, 4}).tensor()), Error);
  EXPECT_THROW(softmax(x.tensor().slice(0, 0, 2), x.tensor().slice(0, 1, 3)), Error);  // partial overlap
}

}  // namespace
}  // namespace sol
