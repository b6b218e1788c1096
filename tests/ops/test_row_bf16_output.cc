// The AVX-512 row kernels with bf16 outputs (silu-mul, gelu, softmax from bf16 inputs) compute
// in cheaper kernels of their own and write whole lines with non-temporal stores when the output
// is larger than the cache. Their yardstick is the correctly rounded fp64 value, within 1 ulp,
// on every path, for outputs large enough to stream, for subnormal results and for rows that
// start off a 64-byte line (a NaN only has to stay a NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/bf16_ulps.h"
#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/stream_threshold.h"
#include "sol/activation.h"
#include "sol/hw.h"
#include "sol/softmax.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

// Rows past the streaming threshold in bf16 (lowered by each test: ops/stream_threshold.h), so
// the op streams its output (AVX-512: the other paths do not stream and need not run that long).
int64_t streaming_rows(int64_t n) {
  if (active_isa() < Isa::avx512) return 20;
  return testing_stream::kStreamBytes / (2 * n) + 3;
}

// Inputs with NaN, infinities, subnormals, and products that land in the subnormal range.
Buffer special_inputs(int64_t rows, int64_t cols, uint64_t seed) {
  Buffer x(DType::bf16, {rows, cols});
  fill_random_with_specials(x, seed, 13);
  uint16_t* p = x.tensor().data_as<uint16_t>();
  for (int64_t i = 5; i < x.tensor().numel(); i += 97) p[i] = f32_to_bf16(i % 2 ? 3e-20f : -1e-38f);
  return x;
}

// silu-mul into a bf16 view `offset` elements into rows of inter + 1, against the fp64
// silu(g) * u of each element: within 1 ulp of its correctly rounded bf16 (NaN: any NaN; -inf
// gates give NaN, -inf / inf in the reference).
void expect_silu_mul_bf16_within_ulp(const Tensor& gu, int64_t offset) {
  const int64_t rows = gu.shape(0), inter = gu.shape(1) / 2;
  Buffer y16(DType::bf16, {rows, inter + 1});
  poison(y16);
  silu_mul(gu, y16.tensor().slice(1, offset, offset + inter));
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      const double g = bf16_to_f32(gu.data_as<uint16_t>()[r * 2 * inter + c]);
      const double u = bf16_to_f32(gu.data_as<uint16_t>()[r * 2 * inter + inter + c]);
      const double ref = g / (1 + std::exp(-g)) * u;
      const uint16_t got = y16.tensor().data_as<uint16_t>()[r * (inter + 1) + offset + c];
      const bool ok = std::isnan(ref) ? std::isnan(bf16_to_f32(got))
                                      : testing_bf16::bf16_ulps_apart(got, testing_bf16::bf16_rounded(ref)) <= 1;
      if (!ok && wrong++ < 5)
        ADD_FAILURE() << "row " << r << " col " << c << ": g " << g << " u " << u << ": bf16 0x" << std::hex << got
                      << ", fp64 " << ref;
    }
  EXPECT_EQ(wrong, 0);
}

TEST(RowBf16Output, SiluMulWithinOneUlpOfFp64) {
  const testing_stream::LowStreamThreshold low;
  for_each_isa([] {
    for (int64_t offset : {0, 1}) {
      const int64_t inter = 1000, rows = offset ? 9 : streaming_rows(inter);
      Buffer gu = special_inputs(rows, 2 * inter, 3);
      uint16_t* p = gu.tensor().data_as<uint16_t>();
      for (int64_t r = 0; r < rows; ++r)  // silu(3e-20) * 1e-19: a subnormal f32 result
        for (int64_t c = 0; c < inter; c += 89) p[r * 2 * inter + c] = f32_to_bf16(3e-20f), p[r * 2 * inter + inter + c] = f32_to_bf16(1e-19f);
      expect_silu_mul_bf16_within_ulp(gu.tensor(), offset);
    }
  });
}

// gelu into a bf16 view `offset` elements into rows of h + 1, against the fp64 GELU of each
// bf16 input rounded to bf16, 1 ulp allowed; NaN and -inf give NaN, +inf gives +inf.
void expect_gelu_bf16_within_ulp(const Tensor& x, int64_t offset, GeluForm form) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  Buffer y16(DType::bf16, {rows, h + 1});
  poison(y16);
  gelu(x, y16.tensor().slice(1, offset, offset + h), form);
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < h; ++c) {
      const double v = bf16_to_f32(x.data_as<uint16_t>()[r * h + c]);
      const uint16_t got = y16.tensor().data_as<uint16_t>()[r * (h + 1) + offset + c];
      bool ok;
      if (std::isnan(v) || v == -INFINITY) {
        ok = std::isnan(bf16_to_f32(got));
      } else if (v == INFINITY) {
        ok = bf16_to_f32(got) == INFINITY;
      } else {
        const double ref = form == GeluForm::erf ? 0.5 * v * std::erfc(-v / std::sqrt(2.0))
                                                 : v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        ok = testing_bf16::bf16_ulps_apart(got, testing_bf16::bf16_rounded(ref)) <= 1;
      }
      if (!ok && wrong++ < 5)
        ADD_FAILURE() << "row " << r << " col " << c << " x " << v << ": bf16 0x" << std::hex << got;
    }
  EXPECT_EQ(wrong, 0);
}

// Subnormal inputs give subnormal outputs (x / 2), which the guarded conversion must keep.
TEST(RowBf16Output, GeluWithinOneUlpOfFp64) {
  const testing_stream::LowStreamThreshold low;
  for_each_isa([] {
    for (GeluForm form : {GeluForm::tanh, GeluForm::erf})
      for (int64_t offset : {0, 1}) {
        const int64_t h = 777, rows = offset ? 5 : streaming_rows(h);
        Buffer x = special_inputs(rows, h, 11);
        expect_gelu_bf16_within_ulp(x, offset, form);
      }
  });
}

// softmax's bf16 outputs from bf16 inputs come from a cheaper exponential (sol/softmax.h):
// their yardstick is the correctly rounded fp64 softmax, within 1 ulp, on the
// streamed and the off-line paths.
TEST(RowBf16Output, SoftmaxWithinOneUlpOfFp64) {
  const testing_stream::LowStreamThreshold low;
  for_each_isa([] {
    for (int64_t offset : {0, 1}) {
      const int64_t n = 1500, rows = offset ? 7 : streaming_rows(n);
      Buffer x(DType::bf16, {rows, n});
      fill_random(x, 19, 60.0);  // wide logits: many probabilities are subnormal or zero
      // softmax takes contiguous tensors only: the bf16 output is a flat view `offset` elements in.
      Buffer y16(DType::bf16, {rows * n + 1});
      poison(y16);
      Tensor view(y16.tensor().data_as<uint16_t>() + offset, DType::bf16, {rows, n});
      softmax(x, view);
      int64_t wrong = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* row = x.tensor().data_as<uint16_t>() + r * n;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < n; ++c) mx = std::max(mx, double(bf16_to_f32(row[c])));
        for (int64_t c = 0; c < n; ++c) sum += std::exp(double(bf16_to_f32(row[c])) - mx);
        for (int64_t c = 0; c < n; ++c) {
          const double want = std::exp(double(bf16_to_f32(row[c])) - mx) / sum;
          const uint16_t got = view.data_as<uint16_t>()[r * n + c];
          if (testing_bf16::bf16_ulps_apart(got, testing_bf16::bf16_rounded(want)) > 1 && wrong++ < 5)
            ADD_FAILURE() << "row " << r << " col " << c << ": bf16 0x" << std::hex << got << " want " << want;
        }
      }
      EXPECT_EQ(wrong, 0) << "offset " << offset;
    }
  });
}

}  // namespace
}  // namespace sol
