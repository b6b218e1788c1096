// Ops that may run in place (y is x: softmax, gelu, the norms) give the out-of-place bits
// there, and refuse a y that starts at x with another dtype or other strides, or that
// overlaps x elsewhere: one row's output would land on rows other threads (or the row's own
// later passes) still read, a silent wrong answer. Fused quantizers refuse q or scales over
// their input.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "ops/common/fill.h"
#include "ops/error_message.h"
#include "sol/activation.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/softmax.h"

namespace sol {
namespace {

using testing_errors::message_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// out = op(x, y) out of place and in place (a copy of x as its own y): the same bytes.
void expect_in_place_matches(const char* what, DType dt, const std::function<void(const Tensor&, const Tensor&)>& op) {
  const int64_t rows = 37, h = 1000;
  Buffer x(dt, {rows, h}), y(dt, {rows, h}), z(dt, {rows, h});
  fill_random(x, 11, 4.0);
  poison(y);
  op(x, y);
  std::memcpy(z.tensor().data(), x.tensor().data(), size_t(x.tensor().nbytes()));
  op(z, z);
  EXPECT_EQ(std::memcmp(y.tensor().data(), z.tensor().data(), size_t(y.tensor().nbytes())), 0)
      << what << " " << dtype_name(dt) << ": in place differs from out of place";
}

// y at x's address with another dtype, y one row past x, y at x's address with other strides
// (for ops that take strided rows; softmax wants them contiguous and says so first).
void expect_bad_aliases_refused(const char* what, const std::function<void(const Tensor&, const Tensor&)>& op,
                                bool strided_rows = true) {
  const int64_t rows = 8, h = 64;
  Buffer x(DType::bf16, {rows + 1, 2 * h});  // room for the shifted and the wider views
  fill_random(x, 5, 2.0);
  const Tensor xv = x.tensor().slice(0, 0, rows).slice(1, 0, h);
  const Tensor as_f32(x.tensor().data(), DType::f32, {rows, h});
  const std::string other_dtype = message_of([&] { op(Tensor(x.tensor().data(), DType::bf16, {rows, h}), as_f32); });
  EXPECT_TRUE(contains(other_dtype, "in place needs y to be x itself")) << what << ": " << other_dtype;
  const Tensor dense(x.tensor().data(), DType::bf16, {rows, h});
  const Tensor shifted = Tensor(x.tensor().data_as<uint16_t>() + h, DType::bf16, {rows, h});
  const std::string overlap = message_of([&] { op(dense, shifted); });
  EXPECT_TRUE(contains(overlap, "x and y overlap in memory")) << what << ": " << overlap;
  if (!strided_rows) return;
  const std::string strides = message_of([&] { op(xv, dense); });  // row stride 2h against h
  EXPECT_TRUE(contains(strides, "in place needs y to be x itself")) << what << ": " << strides;
}

TEST(InPlace, SoftmaxGeluAndTheNormsMatchOutOfPlace) {
  Buffer w(DType::bf16, {1000}), b(DType::bf16, {1000});
  fill_random(w, 2, 1.0);
  fill_random(b, 3, 1.0);
  for (DType dt : {DType::f32, DType::bf16}) {
    expect_in_place_matches("softmax", dt, [](const Tensor& x, const Tensor& y) { softmax(x, y); });
    expect_in_place_matches("gelu", dt, [](const Tensor& x, const Tensor& y) { gelu(x, y); });
    expect_in_place_matches("rmsnorm", dt, [&](const Tensor& x, const Tensor& y) { rmsnorm(x, w, y); });
    expect_in_place_matches("layernorm", dt, [&](const Tensor& x, const Tensor& y) { layernorm(x, w, &b.tensor(), y); });
  }
}

// One row: its row stride is never used, so a y over x that differs only there is x itself.
TEST(InPlace, ASizeOneDimensionsStrideDoesNotMatter) {
  Buffer x(DType::bf16, {1, 64}), w(DType::bf16, {64});
  fill_random(x, 6, 2.0);
  fill_random(w, 7, 1.0);
  const int64_t shape[2] = {1, 64}, strides[2] = {4096, 1};
  const Tensor wide(x.tensor().data(), DType::bf16, shape, strides);
  EXPECT_NO_THROW(rmsnorm(wide, w, x));
  EXPECT_NO_THROW(gelu(wide, x));
}

TEST(InPlace, AddRmsnormWithYOverXMatchesOutOfPlace) {
  const int64_t rows = 19, h = 1000;
  Buffer x(DType::bf16, {rows, h}), r1(DType::bf16, {rows, h}), r2(DType::bf16, {rows, h}), y(DType::bf16, {rows, h});
  Buffer w(DType::bf16, {h});
  fill_random(x, 7, 3.0);
  fill_random(r1, 8, 3.0);
  fill_random(w, 9, 1.0);
  std::memcpy(r2.tensor().data(), r1.tensor().data(), size_t(r1.tensor().nbytes()));
  poison(y);
  add_rmsnorm(x, r1, w, y);
  add_rmsnorm(x, r2, w, x);  // y is x
  EXPECT_EQ(std::memcmp(y.tensor().data(), x.tensor().data(), size_t(y.tensor().nbytes())), 0);
  EXPECT_EQ(std::memcmp(r1.tensor().data(), r2.tensor().data(), size_t(r1.tensor().nbytes())), 0);
}

TEST(InPlace, AYOverXWithAnotherDtypeOrStridesOrOffsetIsRefused) {
  Buffer w(DType::bf16, {64});
  fill_random(w, 2, 1.0);
  expect_bad_aliases_refused("softmax", [](const Tensor& x, const Tensor& y) { softmax(x, y); }, false);
  expect_bad_aliases_refused("gelu", [](const Tensor& x, const Tensor& y) { gelu(x, y); });
  expect_bad_aliases_refused("rmsnorm", [&](const Tensor& x, const Tensor& y) { rmsnorm(x, w, y); });
  expect_bad_aliases_refused("layernorm", [&](const Tensor& x, const Tensor& y) { layernorm(x, w, nullptr, y); });
  Buffer res(DType::bf16, {8, 64});
  expect_bad_aliases_refused("add_rmsnorm", [&](const Tensor& x, const Tensor& y) { add_rmsnorm(x, res, w, y); });
}

TEST(InPlace, FusedQuantizersRefuseCodesOrScalesOverTheirInput) {
  const int64_t rows = 4, h = 256;
  Buffer x(DType::bf16, {rows, 2 * h}), w(DType::bf16, {h}), s(DType::f32, {rows, h / 128});
  fill_random(x, 4, 2.0);
  fill_random(w, 5, 1.0);
  const Tensor xh = x.tensor().slice(1, 0, h);
  const Tensor q_over_x(x.tensor().data(), DType::f8e4m3, {rows, h});  // q on x's first bytes
  const Tensor s_over_x(x.tensor().data(), DType::f32, {rows, h / 128});
  Buffer q(DType::f8e4m3, {rows, h});
  EXPECT_TRUE(contains(message_of([&] { rmsnorm_quant_fp8(xh, w, q_over_x, s); }), "x and q overlap in memory"));
  EXPECT_TRUE(contains(message_of([&] { rmsnorm_quant_fp8(xh, w, q, s_over_x); }), "x and scales overlap in memory"));
  EXPECT_TRUE(contains(message_of([&] { gelu_quant_fp8(xh, q_over_x, s); }), "x and q overlap in memory"));
  EXPECT_TRUE(
      contains(message_of([&] { silu_mul_quant_fp8(x, q_over_x, s); }), "gate_up and q overlap in memory"));
}

}  // namespace
}  // namespace sol
