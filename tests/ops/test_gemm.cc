#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/reference.h"
#include "sol/copy.h"
#include "ops/error_message.h"
#include "ops/gemm_paths.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_gemm_path;

struct Case {
  int64_t m, n, k;
  DType in = DType::f32, out = DType::f32;
  Layout layout = Layout::nn;
  bool packed = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, silu = false, in_place = false;
  int64_t pad = 0;  // extra elements per row of every operand (leading dimension > width)
};

std::string describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " " +
         std::string(dtype_name(c.in)) + "->" + std::string(dtype_name(c.out)) +
         (c.layout == Layout::nn ? " nn" : " nt") + (c.packed ? " packed" : "") +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) + (c.bias ? " bias" : "") +
         (c.silu ? " silu" : "") + (c.in_place ? " in-place" : "") + " pad=" + std::to_string(c.pad);
}

// A [rows, cols] view into a buffer with `pad` spare elements per row.
struct Matrix {
  Buffer buf;
  Tensor view;
  Matrix(DType t, int64_t rows, int64_t cols, int64_t pad) : buf(t, {rows, cols + pad}) {
    view = buf.tensor().slice(1, 0, cols);
  }
};

double tolerance(const Case& c) {
  return c.in == DType::bf16 || c.out == DType::bf16 ? 1e-2 : 1e-5 * std::max(1.0, std::sqrt(c.k / 4096.0));
}

// Runs the case once on random inputs; returns D (contiguous copy) and checks the padding of
// D was never written and (unless `against_reference` is false) the values.
Buffer run_case(const Case& c, uint64_t seed = 1, bool against_reference = true) {
  const int64_t bk = c.layout == Layout::nn ? c.k : c.n, bn = c.layout == Layout::nn ? c.n : c.k;
  Matrix a(c.in, c.m, c.k, c.pad), b(c.in, bk, bn, c.pad), d(c.out, c.m, c.n, c.pad), cm(c.out, c.m, c.n, c.pad);
  Buffer bias(DType::f32, {c.n});
  fill_random(a.buf, seed, 1.0);
  fill_random(b.buf, seed + 1, 1.0);
  fill_random(cm.buf, seed + 2, 1.0);
  fill_random(bias, seed + 3, 1.0);
  poison(d.buf);
  if (c.in_place) copy(cm.view, d.view);

  GemmOptions opt;
  opt.alpha = c.alpha;
  opt.beta = c.beta;
  opt.layout = c.layout;
  opt.c = c.in_place ? nullptr : &cm.view;
  opt.bias = c.bias ? &bias.tensor() : nullptr;
  opt.activation = c.silu ? Activation::silu : Activation::none;
  if (c.packed) gemm(a.view, pack_b(b.view, c.layout), d.view, opt);
  else gemm(a.view, b.view, d.view, opt);

  Buffer out(c.out, {c.m, c.n}), ref(DType::f32, {c.m, c.n});
  copy(d.view, out);
  const size_t es = dtype_size(c.out);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < c.n + c.pad; ++j) {
      const auto* p = static_cast<const unsigned char*>(d.buf.data()) + (i * (c.n + c.pad) + j) * int64_t(es);
      EXPECT_EQ(p[0], 0xFF) << describe(c) << ": wrote outside D at row " << i << " column " << j;
    }
  if (!against_reference) return out;
  reference_gemm(a.view, b.view, c.layout, &cm.view, c.alpha, c.beta, c.bias ? &bias.tensor() : nullptr,
                 c.silu ? Activation::silu : Activation::none, ref);
  CheckResult r = compare_relative(out, ref, tolerance(c));
  EXPECT_TRUE(r.pass) << describe(c) << ": " << r.detail;
  EXPECT_LT(gemm_diff_metric(out, ref), 1e-4) << describe(c);
  return out;
}

TEST(Gemm, OddShapesEveryPath) {
  for_each_gemm_path([] {
    for (DType in : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nn, Layout::nt})
        for (bool packed : {false, true})
          for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {17, 33, 37}, {127, 45, 129}, {13, 65, 531},
                                 {3, 97, 1031}})
            run_case({m, n, k, in, in, layout, packed});
  });
}

TEST(Gemm, EpilogueAndLeadingDimensionsEveryPath) {
  for_each_gemm_path([] {
    for (DType out : {DType::f32, DType::bf16})
      for (bool in_place : {false, true})
        for (int64_t k : {int64_t(7), int64_t(2300)}) {  // one K block, and two (KC 2048)
          const DType in = out == DType::bf16 ? DType::bf16 : DType::f32;
          run_case({29, 70, k, in, out, Layout::nt, false, 0.75f, -1.25f, true, true, in_place, 5});
          run_case({14, 33, k, in, out, Layout::nn, true, 2.0f, 1.0f, false, false, in_place, 3});
          // alpha alone: the tiles' short end (one K block, nothing but alpha * sums into D).
          run_case({25, 47, k, in, out, Layout::nt, true, -0.375f, 0.0f, false, false, false, 1});
        }
    run_case({20, 40, 300, DType::bf16, DType::f32, Layout::nn, false, 1.0f, 0.0f, true, true, false, 0});
  });
}

TEST(Gemm, SkinnyAndMultiBlockShapes) {
  // M <= 16 splits N; a tall M splits rows; N > 2048 and K > KC exercise every block loop.
  run_case({16, 4100, 300, DType::f32, DType::f32, Layout::nt, true});
  run_case({1, 2112, 1100, DType::bf16, DType::bf16, Layout::nt, true});
  run_case({100, 2100, 300, DType::f32, DType::f32, Layout::nn, false});
  run_case({390, 70, 600, DType::bf16, DType::bf16, Layout::nn, false, 1.0f, 0.5f, false, false, true});
  // bf16 KC is 2048: K blocks with partial sums in D (f32 out) and in the workspace (bf16 out,
  // and C = D in place).
  run_case({30, 50, 4500, DType::bf16, DType::f32, Layout::nt, true});
  run_case({20, 40, 4500, DType::f32, DType::f32, Layout::nn, false, 0.5f, 1.0f, true, false, false});
  run_case({30, 50, 4500, DType::bf16, DType::bf16, Layout::nn, false, 1.0f, 1.0f, true, false, true});
}

TEST(Gemm, EmptyDimensions) {
  for_each_gemm_path([] {
    run_case({0, 5, 7});
    run_case({5, 0, 7});
    run_case({5, 7, 0, DType::f32, DType::f32, Layout::nn, false, 1.0f, 2.0f, true, false});
    run_case({5, 7, 0, DType::bf16, DType::bf16, Layout::nt, true, 1.0f, 0.0f, false, true});
  });
}

TEST(Gemm, NanAndInfPropagate) {
  for_each_gemm_path([] {
    for (DType in : {DType::f32, DType::bf16}) {
      const int64_t m = 13, n = 40, k = 50;
      Buffer a(in, {m, k}), b(in, {k, n}), d(DType::f32, {m, n});
      fill_random(a, 3, 1.0);
      fill_random(b, 4, 1.0);
      const double inf = std::numeric_limits<double>::infinity();
      store_from_double(a.data(), in, 2 * k + 5, std::nan(""));  // row 2 -> NaN
      store_from_double(b.data(), in, 7 * n + 33, inf);          // column 33 -> +-inf
      store_from_double(a.data(), in, 4 * k + 7, 0.0);           // ... except 0 * inf = NaN in row 4
      poison(d);  // NaN everywhere: beta = 0 must not read it
      gemm(a, b, d);
      const float* out = d.tensor().data_as<const float>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float v = out[i * n + j];
          if (i == 2 || (i == 4 && j == 33)) EXPECT_TRUE(std::isnan(v)) << i << "," << j;
          else if (j == 33) EXPECT_TRUE(std::isinf(v)) << i << "," << j << " = " << v;
          else EXPECT_TRUE(std::isfinite(v)) << i << "," << j << " = " << v;
        }
    }
  });
}

TEST(Gemm, BitwiseIdenticalForOneAndTwoThreadsAndPackedOrPlain) {
  for (Case c : {Case{300, 2100, 600, DType::f32, DType::f32}, Case{16, 1000, 700, DType::bf16, DType::bf16, Layout::nt},
                 Case{900, 100, 2500, DType::bf16, DType::f32, Layout::nn, false, 1.0f, 1.0f, true, true, true}}) {
    set_num_threads(1);
    Buffer one = run_case(c, 9, false);
    set_num_threads(2);
    Buffer two = run_case(c, 9, false);
    c.packed = true;
    Buffer packed = run_case(c, 9, false);
    set_num_threads(0);
    EXPECT_TRUE(compare_bitwise(two, one).pass) << describe(c) << ": 2 threads vs 1";
    EXPECT_TRUE(compare_bitwise(packed, one).pass) << describe(c) << ": packed vs plain";
  }
}

using testing_errors::message_of;

TEST(Gemm, BadInputThrowsWithClearMessages) {
  Buffer a(DType::f32, {4, 96}), b(DType::f32, {128, 8}), d(DType::f32, {4, 8});
  Buffer a16(DType::bf16, {4, 128}), b16(DType::bf16, {128, 8}), d16(DType::bf16, {4, 8});
  Buffer a_ok(DType::f32, {4, 128}), i8(DType::i8, {4, 128}), bias(DType::f32, {7});
  EXPECT_EQ(message_of([&] { gemm(a, b, d); }), "gemm: a.shape[1] = 96 but b.shape[0] = 128");
  EXPECT_EQ(message_of([&] { gemm(a16, b, d); }),
            "gemm: a.dtype = bf16 with b.dtype = f32 is not supported (f32 x f32, bf16 x bf16, i8 x i8, "
            "u8 x i8, f8e4m3 x f8e4m3, bf16 x f8e4m3)");
  EXPECT_EQ(message_of([&] { gemm(a_ok, b, d16); }), "gemm: d.dtype = bf16 but f32 inputs give an f32 output");
  EXPECT_NE(message_of([&] { gemm(i8, b, d); }).find("gemm: a.dtype = i8 with b.dtype = f32 is not supported"),
            std::string::npos);
  EXPECT_EQ(message_of([&] { gemm(a_ok, b, Buffer(DType::f32, {4, 9})); }), "gemm: d.shape[1] = 9 but B has n = 8");
  GemmOptions with_bias;
  with_bias.bias = &bias.tensor();
  EXPECT_EQ(message_of([&] { gemm(a_ok, b, d, with_bias); }), "gemm: bias.shape = [7] but must be [8]");
  GemmOptions nt;
  nt.layout = Layout::nt;
  EXPECT_NE(message_of([&] { gemm(a_ok, b, d, nt); }).find("gemm: a.shape[1] = 128 but b.shape[1] = 8"), std::string::npos);
  EXPECT_NE(message_of([&] { gemm(a16, pack_b(b, Layout::nn), d); }).find("b.dtype = f32"), std::string::npos);
  EXPECT_EQ(message_of([&] { gemm(a_ok, PackedMatrix(), d); }),
            "gemm: b is an empty PackedMatrix (moved from, or never packed)");

  // D overlapping an input, C overlapping D without being D, a row-strided last dimension.
  Buffer big(DType::f32, {8, 128});
  Tensor top = big.tensor().slice(0, 0, 4), shifted = big.tensor().slice(0, 2, 6);
  EXPECT_EQ(message_of([&] { gemm(top, b, shifted.slice(1, 0, 8)); }), "gemm: d and a overlap in memory");
  Buffer bsq(DType::f32, {8, 8});
  Tensor bsq_rows = bsq.tensor().slice(0, 0, 4);
  EXPECT_EQ(message_of([&] { gemm(Buffer(DType::f32, {4, 8}), bsq, bsq_rows); }), "gemm: d and b overlap in memory");
  GemmOptions with_c;
  with_c.beta = 1.0f;
  Tensor c_shifted = big.tensor().slice(0, 1, 5).slice(1, 0, 8);
  with_c.c = &c_shifted;
  EXPECT_EQ(message_of([&] { gemm(a_ok, b, big.tensor().slice(0, 0, 4).slice(1, 0, 8), with_c); }),
            "gemm: c and d overlap in memory");
  const int64_t shape[] = {4, 128}, strides[] = {256, 2};
  EXPECT_NE(message_of([&] { gemm(Tensor(big.data(), DType::f32, shape, strides), b, d); }).find("a.strides[1] = 2"),
            std::string::npos);
}

TEST(Gemm, PackedMatrixDescribesItself) {
  Buffer b(DType::bf16, {30, 77});
  fill_random(b, 1);
  PackedMatrix nn = pack_b(b, Layout::nn), nt = pack_b(b, Layout::nt);
  EXPECT_EQ(nn.k(), 30);
  EXPECT_EQ(nn.n(), 77);
  EXPECT_EQ(nt.k(), 77);
  EXPECT_EQ(nt.n(), 30);
  EXPECT_EQ(nt.dtype(), DType::bf16);
  PackedMatrix moved = std::move(nn);
  EXPECT_TRUE(nn.empty());
  EXPECT_EQ(moved.k(), 30);
  EXPECT_THROW(pack_b(Buffer(DType::i32, {4, 4}), Layout::nn), Error);
  EXPECT_THROW(pack_b(Buffer(DType::f16, {4, 4}), Layout::nn), Error);
}

}  // namespace
}  // namespace sol
