#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "isa_paths.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/stream_threshold.h"
#include "random_bytes.h"
#include "sol/error.h"
#include "sol/moe_permute.h"
#include "sol/registry.h"
#include "sol/threads.h"

namespace sol {
namespace {

TEST(MoePermute, LayoutByHandWithPaddingAndMaskedEntries) {
  // 3 tokens, k = 2, 3 experts, alignment 4; (1,1) is masked (-1). By expert: 0: (2,1);
  // 1: (0,1), (2,0); 2: (0,0), (1,0).
  const int32_t idx[] = {2, 1, 2, -1, 1, 0};
  Buffer ids(DType::i32, {3, 2});
  std::memcpy(ids.data(), idx, sizeof(idx));
  EXPECT_EQ(moe_permuted_rows(ids, 3, 4), 12);
  Buffer x(DType::f32, {3, 2}), perm(DType::f32, {12, 2}), layout(DType::i32, {12}), row_of(DType::i32, {3, 2});
  for (int i = 0; i < 6; ++i) x.tensor().data_as<float>()[i] = float(10 * (i / 2) + i % 2 + 1);
  poison(perm);
  moe_permute(x, ids, 3, 4, perm, layout, row_of);
  const int32_t want_layout[] = {0, -1, -1, -1, 1, 1, -1, -1, 2, 2, -1, -1};
  EXPECT_EQ(std::memcmp(layout.data(), want_layout, sizeof(want_layout)), 0);
  const int32_t want_rows[] = {8, 4, 9, -1, 5, 0};
  EXPECT_EQ(std::memcmp(row_of.data(), want_rows, sizeof(want_rows)), 0);
  const float* p = perm.tensor().data_as<float>();
  EXPECT_EQ(p[0], 21.0f);   // row 0 = token 2
  EXPECT_EQ(p[2], 0.0f);    // padding is zeroed
  EXPECT_EQ(p[16], 1.0f);   // row 8 = token 0
  // Combine back with weights: token 1 only has its expert-2 row, weight 0.5.
  Buffer w(DType::f32, {3, 2}), out(DType::f32, {3, 2});
  const float wt[] = {0.25f, 0.75f, 0.5f, 9.0f, 1.0f, 2.0f};
  std::memcpy(w.data(), wt, sizeof(wt));
  moe_unpermute(perm, row_of, w, out);
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[0], 1.0f);   // 0.25 * 1 + 0.75 * 1
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[2], 5.5f);   // 0.5 * 11, the masked weight ignored
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[4], 63.0f);  // 1 * 21 + 2 * 21
}

TEST(MoePermute, BadInputIsNamed) {
  Buffer ids(DType::i32, {2, 2});
  const int32_t bad[] = {0, 1, 5, 0};
  std::memcpy(ids.data(), bad, sizeof(bad));
  try {
    moe_permuted_rows(ids, 4, 128);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_idx[1, 0] = 5 outside [0, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(moe_permuted_rows(ids, 8, 0), Error);
  const int32_t ok[] = {0, 1, 2, 3};
  std::memcpy(ids.data(), ok, sizeof(ok));
  Buffer x(DType::f32, {2, 4}), perm(DType::f32, {3, 4}), layout(DType::i32, {3}), row_of(DType::i32, {2, 2});
  EXPECT_THROW(moe_permute(x, ids, 4, 128, perm, layout, row_of), Error);  // needs 512 rows
}

// i64 expert ids (DeepEP's type) give the same rows, layout and row_of as the same ids in i32;
// an i64 id past 2^31 is named, not truncated into range.
TEST(MoePermute, I64IdsPermuteAsTheirI32Values) {
  const int64_t tokens = 29, k = 6, experts = 9, h = 40;
  Buffer ids32(DType::i32, {tokens, k}), ids64(DType::i64, {tokens, k});
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int32_t e = int32_t((i * 7 + i / 5) % (experts + 1)) - 1;  // -1 .. experts-1
    ids32.tensor().data_as<int32_t>()[i] = e;
    ids64.tensor().data_as<int64_t>()[i] = e;
  }
  const int64_t rows = moe_permuted_rows(ids32, experts, 8);
  ASSERT_EQ(moe_permuted_rows(ids64, experts, 8), rows);
  Buffer x(DType::bf16, {tokens, h});
  fill_bytes(x, 3);
  Buffer p32(DType::bf16, {rows, h}), p64(DType::bf16, {rows, h}), l32(DType::i32, {rows}), l64(DType::i32, {rows}),
      r32(DType::i32, {tokens, k}), r64(DType::i32, {tokens, k});
  poison(p64);
  poison(l64);
  poison(r64);
  moe_permute(x, ids32, experts, 8, p32, l32, r32);
  moe_permute(x, ids64, experts, 8, p64, l64, r64);
  EXPECT_EQ(std::memcmp(p32.data(), p64.data(), p32.bytes()), 0);
  EXPECT_EQ(std::memcmp(l32.data(), l64.data(), l32.bytes()), 0);
  EXPECT_EQ(std::memcmp(r32.data(), r64.data(), r32.bytes()), 0);
  ids64.tensor().data_as<int64_t>()[7] = (int64_t(1) << 32) + 2;  // 2 if truncated to 32 bits
  try {
    moe_permuted_rows(ids64, experts, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_idx[1, 1] = 4294967298 outside [0, 9)"), std::string::npos) << e.what();
  }
}

// Large enough that x_perm is streamed (non-temporal rows, one fence per thread), on one and two
// threads: every routed row equals its token's row, every padding row is zero.
TEST(MoePermute, StreamedPermuteEveryRowOnOneAndTwoThreads) {
  const testing_stream::LowStreamThreshold low;  // streamed on every machine, whatever its LLC
  const int64_t tokens = 700, k = 7, experts = 13, h = 1200;  // ~28 MB of f32 rows
  Buffer ids(DType::i32, {tokens, k});
  for (int64_t i = 0; i < tokens * k; ++i) ids.tensor().data_as<int32_t>()[i] = int32_t((i * 5 + i / 9) % experts);
  ids.tensor().data_as<int32_t>()[3] = -1;
  const int64_t rows = moe_permuted_rows(ids, experts, 16);
  Buffer x(DType::f32, {tokens, h});
  fill_bytes(x, 9);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Buffer perm(DType::f32, {rows, h}), layout(DType::i32, {rows}), row_of(DType::i32, {tokens, k});
    poison(perm);
    moe_permute(x, ids, experts, 16, perm, layout, row_of);
    std::vector<int64_t> token_of(size_t(rows), -1);
    for (int64_t i = 0; i < tokens * k; ++i)
      if (row_of.tensor().data_as<int32_t>()[i] >= 0) token_of[size_t(row_of.tensor().data_as<int32_t>()[i])] = i / k;
    const size_t row_bytes = size_t(h) * sizeof(float);
    const std::vector<char> zero(row_bytes, 0);
    for (int64_t r = 0; r < rows; ++r) {
      const char* got = perm.tensor().data_as<const char>() + r * int64_t(row_bytes);
      const char* want = token_of[size_t(r)] < 0 ? zero.data() : x.tensor().data_as<const char>() + token_of[size_t(r)] * int64_t(row_bytes);
      ASSERT_EQ(std::memcmp(got, want, row_bytes), 0) << "row " << r << ", " << threads << " threads";
    }
  }
  set_num_threads(0);
}

// The combine's definition, written plainly: per output element, the routed rows in order
// j = 0..k-1, one f32 fused multiply-add per term starting from +0, absent rows (-1) skipped,
// then one rounding to the output type.
Buffer unpermute_reference(const Tensor& y, const Tensor& row_of, const Tensor& w, DType out_type) {
  const int64_t tokens = row_of.shape(0), k = row_of.shape(1), h = y.shape(1);
  Buffer ref(out_type, {tokens, h});
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < h; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t r = row_of.data_as<const int32_t>()[t * k + j];
        if (r < 0) continue;
        const int64_t e = int64_t(r) * h + c;
        const float v = y.dtype() == DType::bf16 ? bf16_to_f32(y.data_as<const uint16_t>()[e]) : y.data_as<const float>()[e];
        acc = std::fma(w.data_as<const float>()[t * k + j], v, acc);
      }
      if (out_type == DType::bf16) ref.tensor().data_as<uint16_t>()[t * h + c] = f32_to_bf16(acc);
      else ref.tensor().data_as<float>()[t * h + c] = acc;
    }
  return ref;
}

struct UnpermuteShape {
  int64_t tokens, k, hidden;
  DType in, out;
};

// Routed rows drawn at random over the permuted tensor, with what real routing produces and
// the kernel must survive: the same row twice in one token, masked entries (-1), and one token
// (the second) with no row at all, whose output must be exactly zero.
void fill_routes(const Tensor& row_of, int64_t rows, uint64_t seed) {
  const int64_t tokens = row_of.shape(0), k = row_of.shape(1);
  int32_t* ro = row_of.data_as<int32_t>();
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < tokens * k; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ro[i] = x % 7 == 0 ? -1 : int32_t(x % uint64_t(rows));
  }
  if (k >= 2) ro[k - 1] = ro[0] >= 0 ? ro[0] : 0;  // token 0: its first row again
  if (tokens >= 2)
    for (int64_t j = 0; j < k; ++j) ro[k + j] = -1;
}

// On the AVX2 and AVX-512 paths the combine keeps the reference's order and fused
// multiply-adds, so the result is bit-identical; the plain path widens and sums in plain f32
// (the compiler may not fuse), so it is held to a rounding tolerance. Shapes: k = 1 and odd k, hidden sizes that
// are not multiples of 16 or 32 (masked ends), f32 and bf16 on both sides (f32 outputs show a
// change of summation order, which a bf16 rounding mostly hides), and a case large
// enough for streaming stores with output rows off 64-byte lines (hidden 7001 bf16); k above the
// unrolled sweeps' 16 rows (17, 20) takes the general loop.
TEST(MoePermute, UnpermuteEqualsInOrderFmaSumOnEveryPath) {
  const std::vector<UnpermuteShape> shapes = {
      {5, 1, 7, DType::bf16, DType::bf16},     {7, 3, 33, DType::bf16, DType::f32},
      {4, 5, 1, DType::f32, DType::bf16},      {9, 8, 129, DType::bf16, DType::bf16},
      {3, 8, 300, DType::f32, DType::f32},     {6, 2, 16, DType::bf16, DType::bf16},
      {6, 7, 95, DType::f32, DType::bf16},     {2, 9, 64, DType::bf16, DType::f32},
      {16, 8, 100, DType::bf16, DType::f32},   {12, 8, 48, DType::f32, DType::f32},
      {1300, 2, 7001, DType::bf16, DType::bf16}, {5, 20, 70, DType::bf16, DType::bf16},
      {4, 17, 40, DType::f32, DType::f32},
  };
  for (const auto& s : shapes) {
    SCOPED_TRACE("tokens " + std::to_string(s.tokens) + " k " + std::to_string(s.k) + " hidden " +
                 std::to_string(s.hidden) + " " + std::string(dtype_name(s.in)) + " -> " +
                 std::string(dtype_name(s.out)));
    const int64_t rows = s.tokens * s.k + 3;
    Buffer y(s.in, {rows, s.hidden}), row_of(DType::i32, {s.tokens, s.k}), w(DType::f32, {s.tokens, s.k});
    Buffer out(s.out, {s.tokens, s.hidden});
    fill_random(y, 11);
    fill_random(w, 12, 1.0);
    fill_routes(row_of, rows, 13);
    const Buffer ref = unpermute_reference(y, row_of, w, s.out);
    const size_t row_bytes = size_t(s.hidden) * dtype_size(s.out);
    testing_paths::for_each_isa([&] {
      poison(out);
      moe_unpermute(y, row_of, w, out);
      if (s.tokens >= 2) {  // the token with no routed row
        const std::vector<char> zeros(row_bytes, 0);
        EXPECT_EQ(std::memcmp(static_cast<char*>(out.data()) + row_bytes, zeros.data(), row_bytes), 0);
      }
      if (active_isa() >= Isa::avx2) {
        EXPECT_EQ(std::memcmp(out.data(), ref.data(), row_bytes * size_t(s.tokens)), 0);
      } else {
        const CheckResult r = compare_relative(out, ref, s.out == DType::bf16 ? 8e-3 : 1e-5);
        EXPECT_TRUE(r.pass) << r.detail;
      }
    });
  }
}

// A NaN in a routed row reaches that column of the output and no other.
TEST(MoePermute, UnpermutePropagatesNaNToItsColumnOnly) {
  Buffer y(DType::bf16, {6, 40}), row_of(DType::i32, {2, 3}), w(DType::f32, {2, 3}), out(DType::bf16, {2, 40});
  fill_random(y, 21);
  fill_random(w, 22, 1.0);
  const int32_t ro[] = {4, 1, 2, 5, 0, 3};
  std::memcpy(row_of.data(), ro, sizeof(ro));
  y.tensor().data_as<uint16_t>()[1 * 40 + 37] = 0x7FC0;  // row 1, column 37 (in the masked end)
  testing_paths::for_each_isa([&] {
    poison(out);
    moe_unpermute(y, row_of, w, out);
    for (int64_t c = 0; c < 40; ++c) {
      EXPECT_EQ(std::isnan(bf16_to_f32(out.tensor().data_as<uint16_t>()[c])), c == 37) << "token 0 column " << c;
      EXPECT_FALSE(std::isnan(bf16_to_f32(out.tensor().data_as<uint16_t>()[40 + c]))) << "token 1 column " << c;
    }
  });
}

}  // namespace
}  // namespace sol
