// MoE grouped GEMM, DeepGEMM semantics: contiguous layout (expert id per row, -1 padding) and
// masked layout (valid rows per expert), bf16 and fp8, against a per-row fp64 reference;
// rows that are padding or masked out must keep their old bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/reference.h"
#include "ops/error_message.h"
#include "ops/gemm_paths.h"
#include "ops/common/rows.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_gemm_path;

struct Experts {
  Buffer b, b_scales;  // [G, N, K] bf16 or fp8, and [G, ceil(N/128), K/128]
};

Experts make_experts(DType t, int64_t g, int64_t n, int64_t k, uint64_t seed) {
  Experts e;
  e.b = Buffer(t, {g, n, k});
  if (t == DType::bf16) {
    fill_random(e.b, seed, 0.5);
    return e;
  }
  e.b_scales = Buffer(DType::f32, {g, (n + 127) / 128, k / 128});
  for (int64_t i = 0; i < g; ++i) {
    Buffer w(DType::f32, {n, k});
    fill_random(w, seed + uint64_t(i), 0.1 * double(i + 1));
    quant_fp8_per_block(w, plane(e.b, i), plane(e.b_scales, i));
  }
  return e;
}

struct Activations {
  Buffer a, a_scales;
};

Activations make_activations(DType t, std::initializer_list<int64_t> shape, int64_t k, uint64_t seed) {
  Activations x;
  Buffer f(DType::f32, shape);
  fill_random(f, seed, 2.0);
  x.a = Buffer(t, shape);
  if (t == DType::bf16) {
    fill_random(x.a, seed, 2.0);
    return x;
  }
  std::vector<int64_t> s(shape);
  s.back() = k / 128;
  x.a_scales = Buffer(DType::f32, std::span<const int64_t>(s));
  const int64_t rows = f.tensor().numel() / k;
  quant_fp8_per_token(f.tensor().reshape({rows, k}), x.a.tensor().reshape({rows, k}),
                      x.a_scales.tensor().reshape({rows, k / 128}));
  return x;
}

// Row r of D against the reference for expert e; rows with e < 0 must still be poison.
void expect_row(const Tensor& d, int64_t r, int64_t e, const Tensor& a, const Tensor* a_scales, const Experts& ex,
                const std::string& what) {
  const int64_t n = d.shape(1);
  const Tensor got = d.slice(0, r, r + 1);
  if (e < 0) {
    const auto* p = static_cast<const uint8_t*>(got.data());
    for (int64_t i = 0; i < n * int64_t(dtype_size(d.dtype())); ++i)
      ASSERT_EQ(p[i], 0xFF) << what << ": row " << r << " was written";
    return;
  }
  Buffer ref(DType::f32, {1, n}), row(d.dtype(), {1, n});
  Tensor sa = a_scales ? a_scales->slice(0, r, r + 1) : Tensor();
  Tensor sb = ex.b_scales.bytes() ? plane(ex.b_scales, e) : Tensor();
  reference_gemm(a.slice(0, r, r + 1), plane(ex.b, e), Layout::nt, nullptr, 1.0f, 0.0f, nullptr, Activation::none,
                 ref, a_scales ? &sa : nullptr, ex.b_scales.bytes() ? &sb : nullptr);
  std::memcpy(row.data(), got.data(), size_t(n) * dtype_size(d.dtype()));
  CheckResult c = compare_relative(row, ref, 1e-2);
  EXPECT_TRUE(c.pass) << what << ": row " << r << " (expert " << e << "): " << c.detail;
}

// Runs of experts 2, pad, 0, 2 again, pad, 1; expert 3 gets no rows.
std::vector<int32_t> layout_rows() {
  std::vector<int32_t> ids;
  for (auto [e, count] : {std::pair<int32_t, int>{2, 30}, {-1, 6}, {0, 13}, {2, 1}, {-1, 3}, {1, 40}})
    ids.insert(ids.end(), size_t(count), e);
  return ids;
}

void run_contiguous(DType a_type, DType b_type, DType out) {
  const int64_t groups = 4, n = 150, k = 256;
  const std::vector<int32_t> ids = layout_rows();
  const int64_t m = int64_t(ids.size());
  const Experts ex = make_experts(b_type, groups, n, k, 5);
  const Activations x = make_activations(a_type, {m, k}, k, 6);
  Buffer layout(DType::i32, {m}), d(out, {m, n});
  std::memcpy(layout.data(), ids.data(), ids.size() * 4);
  poison(d);
  GroupedGemmOptions opt;
  opt.a_scales = a_type == DType::f8e4m3 ? &x.a_scales.tensor() : nullptr;
  opt.b_scales = b_type == DType::f8e4m3 ? &ex.b_scales.tensor() : nullptr;
  grouped_gemm_contiguous(x.a, ex.b, layout, d, opt);
  const std::string what = std::string("contiguous ") + std::string(dtype_name(a_type)) + " x " +
                           std::string(dtype_name(b_type));
  for (int64_t r = 0; r < m; ++r) expect_row(d, r, ids[size_t(r)], x.a, opt.a_scales, ex, what);
}

TEST(GroupedGemm, ContiguousLayoutEveryPath) {
  for_each_gemm_path([] {
    run_contiguous(DType::bf16, DType::bf16, DType::bf16);
    run_contiguous(DType::f8e4m3, DType::f8e4m3, DType::bf16);
    run_contiguous(DType::bf16, DType::f8e4m3, DType::f32);
  });
}

void run_masked(DType a_type, DType b_type) {
  const int64_t groups = 3, max_m = 20, n = 40, k = 384;
  const int32_t valid[groups] = {20, 0, 7};
  const Experts ex = make_experts(b_type, groups, n, k, 7);
  const Activations x = make_activations(a_type, {groups, max_m, k}, k, 8);
  Buffer masked(DType::i32, {groups}), d(DType::bf16, {groups, max_m, n});
  std::memcpy(masked.data(), valid, sizeof(valid));
  poison(d);
  GroupedGemmOptions opt;
  opt.a_scales = a_type == DType::f8e4m3 ? &x.a_scales.tensor() : nullptr;
  opt.b_scales = b_type == DType::f8e4m3 ? &ex.b_scales.tensor() : nullptr;
  grouped_gemm_masked(x.a, ex.b, masked, d, opt);
  for (int64_t g = 0; g < groups; ++g) {
    Tensor sa = opt.a_scales ? plane(x.a_scales, g) : Tensor();
    for (int64_t r = 0; r < max_m; ++r)
      expect_row(plane(d, g), r, r < valid[g] ? g : -1, plane(x.a, g), opt.a_scales ? &sa : nullptr, ex,
                 "masked expert " + std::to_string(g));
  }
}

TEST(GroupedGemm, MaskedLayoutEveryPath) {
  for_each_gemm_path([] {
    run_masked(DType::bf16, DType::bf16);
    run_masked(DType::f8e4m3, DType::f8e4m3);
  });
}

using testing_errors::message_of;

TEST(GroupedGemm, BadInputThrowsWithClearMessages) {
  Buffer a(DType::bf16, {4, 64}), b(DType::bf16, {2, 8, 64}), d(DType::bf16, {4, 8}), layout(DType::i32, {4});
  const int32_t ids[4] = {0, 1, 2, -1};
  std::memcpy(layout.data(), ids, sizeof(ids));
  EXPECT_NE(message_of([&] { grouped_gemm_contiguous(a, b, layout, d); }).find("grouped_layout[2] = 2 but must be"),
            std::string::npos);
  Buffer short_layout(DType::i32, {3});
  EXPECT_NE(message_of([&] { grouped_gemm_contiguous(a, b, short_layout, d); }).find("grouped_layout.shape = [3]"),
            std::string::npos);
  Buffer b2(DType::bf16, {8, 64});
  EXPECT_NE(message_of([&] { grouped_gemm_contiguous(a, b2, layout, d); }).find("b must be [G, N, K]"),
            std::string::npos);
  Buffer a3(DType::bf16, {2, 4, 64}), d3(DType::bf16, {2, 4, 8}), masked(DType::i32, {2});
  const int32_t too_many[2] = {5, 1};
  std::memcpy(masked.data(), too_many, sizeof(too_many));
  EXPECT_NE(message_of([&] { grouped_gemm_masked(a3, b, masked, d3); }).find("masked_m[0] = 5 but must be in [0, 4]"),
            std::string::npos);
  Buffer b8(DType::f8e4m3, {2, 8, 128}), a8(DType::bf16, {4, 128});
  EXPECT_NE(message_of([&] { grouped_gemm_contiguous(a8, b8, layout, d); }).find("needs b_scales"),
            std::string::npos);
}

TEST(GroupedGemm, PackedExpertsMatchPlainBitForBit) {
  for_each_gemm_path([] {
    const std::vector<int32_t> ids = layout_rows();
    const int64_t m = int64_t(ids.size()), n = 150, k = 256;
    for (DType b_type : {DType::bf16, DType::f8e4m3}) {
      const DType a_type = b_type == DType::bf16 ? DType::bf16 : DType::f8e4m3;
      const Experts ex = make_experts(b_type, 4, n, k, 15);
      const Activations x = make_activations(a_type, {m, k}, k, 16);
      std::vector<PackedMatrix> packed;
      for (int64_t g = 0; g < 4; ++g) {
        Tensor sb = b_type == DType::f8e4m3 ? plane(ex.b_scales, g) : Tensor();
        packed.push_back(pack_b(plane(ex.b, g), Layout::nt, b_type == DType::f8e4m3 ? &sb : nullptr));
      }
      Buffer layout(DType::i32, {m}), plain(DType::bf16, {m, n}), pre(DType::bf16, {m, n});
      std::memcpy(layout.data(), ids.data(), ids.size() * 4);
      poison(plain);
      poison(pre);
      GroupedGemmOptions opt;
      opt.a_scales = a_type == DType::f8e4m3 ? &x.a_scales.tensor() : nullptr;
      GroupedGemmOptions plain_opt = opt;
      plain_opt.b_scales = b_type == DType::f8e4m3 ? &ex.b_scales.tensor() : nullptr;
      grouped_gemm_contiguous(x.a, ex.b, layout, plain, plain_opt);
      grouped_gemm_contiguous(x.a, packed, layout, pre, opt);
      EXPECT_TRUE(compare_bitwise(pre, plain).pass) << dtype_name(b_type);
      // Masked, with the same packed experts: rows [0, masked_m[g]) of plane g.
      Buffer a3(a_type, {4, 8, k}), d3(DType::bf16, {4, 8, n}), masked(DType::i32, {4});
      fill_random(a3, 17, 1.0);
      const int32_t valid[4] = {8, 0, 3, 1};
      std::memcpy(masked.data(), valid, sizeof(valid));
      Buffer sa3(DType::f32, {4, 8, k / 128});
      fill_random(sa3, 18, 1.0);
      GroupedGemmOptions mopt;
      mopt.a_scales = a_type == DType::f8e4m3 ? &sa3.tensor() : nullptr;
      poison(d3);
      grouped_gemm_masked(a3, packed, masked, d3, mopt);
      for (int64_t g = 0; g < 4; ++g)
        for (int64_t r = 0; r < 8; ++r) {
          Tensor sa = mopt.a_scales ? plane(sa3, g) : Tensor();
          expect_row(plane(d3, g), r, r < valid[g] ? g : -1, plane(a3, g), mopt.a_scales ? &sa : nullptr, ex,
                     "masked packed");
        }
    }
  });
  std::vector<PackedMatrix> none;
  Buffer a(DType::bf16, {1, 64}), d(DType::bf16, {1, 8}), layout(DType::i32, {1});
  EXPECT_THROW(grouped_gemm_contiguous(a, none, layout, d), Error);
}

TEST(GroupedGemm, BitwiseIdenticalForOneAndTwoThreads) {
  const std::vector<int32_t> ids = layout_rows();
  const int64_t m = int64_t(ids.size()), n = 300, k = 512;
  const Experts ex = make_experts(DType::f8e4m3, 4, n, k, 9);
  const Activations x = make_activations(DType::f8e4m3, {m, k}, k, 10);
  Buffer layout(DType::i32, {m}), one(DType::bf16, {m, n}), two(DType::bf16, {m, n});
  std::memcpy(layout.data(), ids.data(), ids.size() * 4);
  GroupedGemmOptions opt{&x.a_scales.tensor(), &ex.b_scales.tensor()};
  poison(one);
  poison(two);
  set_num_threads(1);
  grouped_gemm_contiguous(x.a, ex.b, layout, one, opt);
  set_num_threads(2);
  grouped_gemm_contiguous(x.a, ex.b, layout, two, opt);
  set_num_threads(0);
  EXPECT_TRUE(compare_bitwise(two, one).pass);
}

}  // namespace
}  // namespace sol
