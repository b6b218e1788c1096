// The AVX2 and AVX-512 norm kernels against the scalar ones, bit for bit: all sum in the same 64 partial
// sums (bf16 rows in the even/odd order of the vector widening, kernels/norm.h) and round the
// same way, for every fusion and every mix of f32 and bf16, over row lengths that leave partial
// blocks of 64 and 32, and with subnormal results (the hardware bf16 conversion's guard).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/copy.h"
#include "kernels/norm.h"
#include "ops/common/fill.h"
#include "ops/stream_threshold.h"
#include "sol/hw.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

bool same_bytes(const Buffer& a, const Buffer& b) {
  return std::memcmp(a.data(), b.data(), size_t(a.tensor().nbytes())) == 0;
}

// The scalar path against each vector level this CPU has (AVX2's portable kernels, AVX-512's
// row pipeline).
template <class Run>
void expect_paths_agree(Run&& run, const char* what) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path on this CPU";
  for (Isa level : {Isa::avx2, Isa::avx512}) {
    if (level > cpu_features().best_isa) continue;
    for (DType xt : {DType::bf16, DType::f32})
      for (DType yt : {DType::bf16, DType::f32})
        for (int64_t h : {1, 7, 9, 31, 33, 64, 95, 1531, 7168}) {
          const int64_t rows = 3;
          setenv("SOL_ISA", "scalar", 1);
          auto a = run(xt, yt, rows, h);
          setenv("SOL_ISA", std::string(isa_name(level)).c_str(), 1);
          auto b = run(xt, yt, rows, h);
          unsetenv("SOL_ISA");
          for (size_t k = 0; k < a.size(); ++k)
            EXPECT_TRUE(same_bytes(a[k], b[k])) << what << " " << isa_name(level) << " " << dtype_name(xt) << " -> "
                                                << dtype_name(yt) << " h=" << h << " output " << k;
        }
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
        std::vector<Buffer> out;
        for (DType wt : {DType::f32, DType::bf16}) {  // bf16 everything: the bf16-weight kernel
          Buffer x = input(xt, rows, h, 3), w(wt, {h});
          fill_random(w, 4, 2.0);
          out.emplace_back(input(rt, rows, h, 5));  // the residual, updated in place
          out.emplace_back(DType::bf16, std::initializer_list<int64_t>{rows, h});
          add_rmsnorm(x, out[out.size() - 2], w, out.back());
        }
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

// The one-pass rmsnorm + quant kernel (bf16 x, groups of 64 or 128) against rmsnorm to bf16
// then quant_fp8_per_token, bit for bit: 1 row, odd row counts split over two threads (ranges
// that end mid-way), rows with a stride, and groups holding inf (huge weights) or NaN, which are
// encoded after each run of 64 groups (group 64 at h = 7168: 112 groups, the NaN in the second
// run; a NaN in the last group of a run; a row of zeros; products that round to subnormal codes).
TEST(NormPaths, OnePassRmsNormQuantEqualsComposition) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path on this CPU";
  for (int64_t group : {64, 128})
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (int64_t rows : {1, 7, 33})
        for (int threads : {1, 2})
          for (int64_t pad : {0, 64}) {
            const int64_t h = 7168, groups = h / group, xs = h + pad;
            const QuantOptions qopt{group, sf};
            Buffer xb(DType::bf16, {rows, xs}), w(DType::bf16, {h}), normed(DType::bf16, {rows, h});
            fill_random(xb, uint64_t(rows * 10 + group), 3.0);
            fill_random(w, 5, 2.0);
            const int64_t shape[2] = {rows, h}, strides[2] = {xs, 1};
            Tensor x(xb.data(), DType::bf16, shape, strides);
            auto put = [&](int64_t r, int64_t c, double v) {
              if (r < rows) store_from_double(xb.data(), DType::bf16, size_t(r * xs + c), v);
            };
            store_from_double(w.data(), DType::bf16, size_t(2 * group + 3), 3.0e38);  // inf in group 2
            for (int64_t c = 5 * group; c < 6 * group; ++c)                             // tiny in group 5
              store_from_double(w.data(), DType::bf16, size_t(c), c % 2 ? 1e-3 : 1e-37);
            for (int64_t r = 0; r < rows; ++r) put(r, 2 * group + 3, 3.0);  // 3 * inv * 3e38: inf
            put(0, 70 * 64 + 5, NAN);             // second run of 64 groups when group = 64
            put(rows - 1, (groups < 64 ? groups : 64) * group - 1, NAN);  // last group of the first run
            for (int64_t c = 0; c < h; ++c)
              if (c != 2 * group + 3) put(3, c, 0.0);
            Buffer q(DType::f8e4m3, {rows, h}), s(DType::f32, {rows, groups});
            Buffer q2b(DType::f8e4m3, {rows, h + pad}), s2(DType::f32, {rows, groups});
            const int64_t qstrides[2] = {h + pad, 1};
            Tensor q2(q2b.data(), DType::f8e4m3, shape, qstrides);
            setenv("SOL_ISA", "avx512", 1);
            set_num_threads(1);
            rmsnorm(x, w, normed);
            quant_fp8_per_token(normed, q, s, qopt);
            poison(q2b);
            poison(s2);
            set_num_threads(threads);
            rmsnorm_quant_fp8(x, w, q2, s2, {}, qopt);
            set_num_threads(0);
            unsetenv("SOL_ISA");
            bool codes_equal = true;
            for (int64_t r = 0; r < rows; ++r)
              codes_equal = codes_equal && std::memcmp(static_cast<const uint8_t*>(q.data()) + r * h,
                                                       static_cast<const uint8_t*>(q2b.data()) + r * (h + pad), size_t(h)) == 0;
            const std::string what = "group " + std::to_string(group) + (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32") +
                                     " rows " + std::to_string(rows) + " threads " + std::to_string(threads) +
                                     " pad " + std::to_string(pad);
            EXPECT_TRUE(codes_equal) << what;
            EXPECT_TRUE(same_bytes(s, s2)) << what;
          }
}

// Products that are exact halfway cases for the bf16 rounding (x = 2 everywhere, eps = 0, so
// inv = 0.5 and y = w exactly; w in f32 with the low 16 bits 0x8000): the values and each
// group's abs-max must round to even, as rmsnorm's output does.
TEST(NormPaths, OnePassRmsNormQuantRoundsTiesToEven) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path on this CPU";
  const int64_t rows = 2, h = 512;
  Buffer x(DType::bf16, {rows, h}), w(DType::f32, {h}), normed(DType::bf16, {rows, h});
  for (int64_t i = 0; i < rows * h; ++i) store_from_double(x.data(), DType::bf16, size_t(i), 2.0);
  for (int64_t c = 0; c < h; ++c) {
    // groups of 128 alternate: odd upper halves (round up), even ones (round down)
    const uint32_t upper = (c / 128) % 2 ? 0x3F80u + 2 * uint32_t(c % 7) : 0x3F81u + 2 * uint32_t(c % 7);
    const uint32_t bits = upper << 16 | 0x8000u;
    std::memcpy(static_cast<char*>(w.data()) + 4 * c, &bits, 4);
  }
  for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
    const QuantOptions qopt{128, sf};
    Buffer q(DType::f8e4m3, {rows, h}), s(DType::f32, {rows, h / 128});
    Buffer q2(DType::f8e4m3, {rows, h}), s2(DType::f32, {rows, h / 128});
    NormOptions no;
    no.eps = 0;
    setenv("SOL_ISA", "avx512", 1);
    rmsnorm(x, w, normed, no);
    quant_fp8_per_token(normed, q, s, qopt);
    poison(q2);
    poison(s2);
    rmsnorm_quant_fp8(x, w, q2, s2, no, qopt);
    unsetenv("SOL_ISA");
    EXPECT_TRUE(same_bytes(q, q2)) << (sf == ScaleFormat::ue8m0 ? "ue8m0" : "f32");
    EXPECT_TRUE(same_bytes(s, s2)) << (sf == ScaleFormat::ue8m0 ? "ue8m0" : "f32");
  }
}

// rmsnorm at each vector level against the scalar path bit for bit with outputs large enough to
// be streamed (past the lowered threshold of ops/stream_threshold.h) and starting off a line (the output loop then has
// a head before its whole lines), row lengths with partial blocks, odd row counts over one and two
// threads, and in place.
TEST(NormPaths, RmsNormStreamedOffLineAndInPlace) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path on this CPU";
  const testing_stream::LowStreamThreshold low;
  for (Isa level : {Isa::avx2, Isa::avx512}) {
    if (level > cpu_features().best_isa) continue;
    for (int64_t h : {int64_t(7168), int64_t(7003), int64_t(1), int64_t(95)})
      for (DType yt : {DType::bf16, DType::f32})
        for (int64_t offset : {0, 1})
          for (int threads : {1, 2}) {
            const int64_t rows = h >= 1000 ? (testing_stream::kStreamBytes / (h * int64_t(dtype_size(yt))) + 3) | 1 : 7;
            Buffer x = input(DType::bf16, rows, h, uint64_t(h + offset));
            Buffer w(DType::bf16, {h}), a(yt, {rows, h});
            Buffer yb(yt, {rows * h + 1});
            fill_random(w, 4, 2.0);
            const int64_t shape[2] = {rows, h}, strides[2] = {h, 1};
            Tensor b(static_cast<char*>(yb.data()) + offset * int64_t(dtype_size(yt)), yt, shape, strides);
            setenv("SOL_ISA", "scalar", 1);
            rmsnorm(x, w, a);
            setenv("SOL_ISA", std::string(isa_name(level)).c_str(), 1);
            set_num_threads(threads);
            rmsnorm(x, w, b);
            if (yt == DType::bf16) rmsnorm(x, w, x);  // in place
            set_num_threads(0);
            unsetenv("SOL_ISA");
            const std::string what = std::string(isa_name(level)) + " h " + std::to_string(h) + " rows " +
                                     std::to_string(rows) + " " + std::string(dtype_name(yt)) + " offset " +
                                     std::to_string(offset) + " threads " + std::to_string(threads);
            EXPECT_EQ(std::memcmp(a.data(), b.data(), size_t(a.tensor().nbytes())), 0) << what;
            if (yt == DType::bf16) {
              EXPECT_TRUE(same_bytes(a, x)) << what << " in place";
            }
          }
  }
}

// At each vector level: layernorm (bf16 weight and bias: the even/odd kernel; f32 ones; no
// bias) and add_rmsnorm against the scalar path bit for bit with streamed outputs (past a
// lowered threshold) starting on a line and off it, over one and two threads: the streamed
// stores are fenced once per thread, after its last row, and every row of the poisoned output
// must still hold the scalar path's bits.
TEST(NormPaths, LayerNormAndAddRmsNormStreamed) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path on this CPU";
  const testing_stream::LowStreamThreshold low;
  for (Isa level : {Isa::avx2, Isa::avx512}) {
    if (level > cpu_features().best_isa) continue;
    for (int64_t h : {int64_t(7168), int64_t(3001)})
      for (int threads : {1, 2})
        for (int variant = 0; variant < 4; ++variant) {  // layernorm bf16 w+b, f32 w+b, no bias; add_rmsnorm (bf16 w)
          const int64_t offset = variant % 2;
          const int64_t rows = (testing_stream::kStreamBytes / (h * 2) + 3) | 1;
          const DType wt = variant == 1 ? DType::f32 : DType::bf16;
          Buffer x = input(DType::bf16, rows, h, uint64_t(h + variant)), w(wt, {h}), b(wt, {h});
          Buffer a(DType::bf16, {rows, h});
          fill_random(w, 4, 2.0);
          fill_random(b, 5, 1.0);
          Buffer yb(DType::bf16, {rows * h + 1});
          const int64_t shape[2] = {rows, h}, strides[2] = {h, 1};
          Tensor y(static_cast<char*>(yb.data()) + offset * 2, DType::bf16, shape, strides);
          Buffer res_a = input(DType::bf16, rows, h, 77), res_b(DType::bf16, {rows, h});
          std::memcpy(res_b.data(), res_a.data(), size_t(rows * h * 2));
          auto run = [&](const Tensor& out, const Tensor& res) {
            if (variant == 3) add_rmsnorm(x, res, w, out);
            else layernorm(x, w, variant == 2 ? nullptr : &b.tensor(), out);
          };
          setenv("SOL_ISA", "scalar", 1);
          run(a, res_a);
          setenv("SOL_ISA", std::string(isa_name(level)).c_str(), 1);
          set_num_threads(threads);
          poison(yb);
          run(y, res_b);
          set_num_threads(0);
          unsetenv("SOL_ISA");
          const std::string what = std::string(isa_name(level)) + " h " + std::to_string(h) + " threads " +
                                   std::to_string(threads) + " variant " + std::to_string(variant);
          EXPECT_EQ(std::memcmp(a.data(), y.data(), size_t(a.tensor().nbytes())), 0) << what;
          if (variant == 3) {
            EXPECT_TRUE(same_bytes(res_a, res_b)) << what << " residual";
          }
        }
  }
}

// The fused output-and-next-statistics kernels (rmsnorm, layernorm) against their two halves
// called apart: the next row's sum of squares (shifted sums) bit for bit equal to sum_squares
// (shifted_sums), scalar and vector, whatever the
// output's alignment (the output loop starts after a head; the statistics from element 0), and
// the output equal to the plain kernel's. Values span 2^-12 .. 2^12, so a partial sum taken in
// another order changes the bits of the sum. With and without look-ahead past the next row
// (ahead: the caller's following rows; the requests are prefetches and must change nothing),
// at the default look-ahead distances and at none.
TEST(NormPaths, FusedNextRowStatisticsEqualTheirPasses) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path on this CPU";
  const TuningParams def = default_tuning_params(core_shape());
  TuningParams near = def;
  near.pass_prefetch_bytes = near.pass_l2_prefetch_bytes = 0;
  for (const TuningParams& tp : {def, near})
  for (int64_t h : {1, 31, 32, 33, 63, 64, 65, 95, 127, 128, 1531, 7168})
    for (int64_t offset : {0, 1, 7})
      for (bool stream : {false, true})
      for (int64_t ahead : {int64_t(0), int64_t(1) << 20}) {
        Buffer x(DType::bf16, {2, h}), w(DType::bf16, {h}), y(DType::bf16, {h + 8}), y2(DType::bf16, {h + 8});
        fill_random(x, uint64_t(h), 1.0);
        fill_random(w, 3, 2.0);
        auto* xs = x.tensor().data_as<uint16_t>();
        for (int64_t i = 0; i < 2 * h; ++i) {
          const double v = load_as_double(xs, DType::bf16, size_t(i));
          store_from_double(xs, DType::bf16, size_t(i), v * std::ldexp(1.0, int((i * 7919) % 25) - 12));
        }
        poison(y);
        poison(y2);
        const auto* wv = w.tensor().data_as<const uint16_t>();
        auto* out = y.tensor().data_as<uint16_t>() + offset;
        auto* out2 = y2.tensor().data_as<uint16_t>() + offset;
        const float got = kernels::rms_apply_bf16w_next_avx512(xs, 0.37f, wv, out, h, stream, xs + h, ahead, tp);
        kernels::rms_apply_bf16w_avx512(xs, 0.37f, wv, out2, h, stream);
        kernels::stream_fence_avx512();
        const float want = kernels::sum_squares_avx512(xs + h, DType::bf16, h, tp);
        const float want_scalar = kernels::sum_squares_scalar(xs + h, DType::bf16, h, tp);
        const std::string what = "h " + std::to_string(h) + " offset " + std::to_string(offset) +
                                 (stream ? " streamed" : "") + " ahead " + std::to_string(ahead) +
                                 " prefetch " + std::to_string(tp.pass_prefetch_bytes);
        EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << what << ": " << got << " vs " << want;
        EXPECT_EQ(std::memcmp(&want, &want_scalar, 4), 0) << what;
        EXPECT_TRUE(same_bytes(y, y2)) << what;

        // layernorm's: the next row's shifted sums, and the output with a bias.
        Buffer b(DType::bf16, {h});
        fill_random(b, 4, 1.0);
        const auto* bv = b.tensor().data_as<const uint16_t>();
        poison(y);
        poison(y2);
        const float shift = 0.75f;
        float sd, sd2, want_d, want_d2, scalar_d, scalar_d2;
        kernels::layernorm_apply_bf16w_next_avx512(xs, 0.5f, 0.125f, 0.37f, wv, bv, out, h, stream, xs + h, shift, &sd,
                                                   &sd2, ahead, tp);
        kernels::layernorm_apply_bf16w_avx512(xs, 0.5f, 0.125f, 0.37f, wv, bv, out2, h, stream);
        kernels::stream_fence_avx512();
        kernels::shifted_sums_avx512(xs + h, DType::bf16, shift, h, &want_d, &want_d2, tp);
        kernels::shifted_sums_scalar(xs + h, DType::bf16, shift, h, &scalar_d, &scalar_d2, tp);
        EXPECT_EQ(std::memcmp(&sd, &want_d, 4), 0) << what << " layernorm: " << sd << " vs " << want_d;
        EXPECT_EQ(std::memcmp(&sd2, &want_d2, 4), 0) << what << " layernorm: " << sd2 << " vs " << want_d2;
        EXPECT_EQ(std::memcmp(&want_d, &scalar_d, 4), 0) << what;
        EXPECT_EQ(std::memcmp(&want_d2, &scalar_d2, 4), 0) << what;
        EXPECT_TRUE(same_bytes(y, y2)) << what << " layernorm";
      }
}

// The AVX2 members of rmsnorm's and layernorm's bf16 pipelines: row r's output and row r + 1's
// statistics from one loop equal the scalar kernels' (sum_squares and scale_by_weight,
// shifted_sums and layernorm_apply with a bias), bit for bit, whatever
// the output's alignment (streamed only when the row starts a line), with look-ahead past the
// next row and without, at the default distances and at none; the plain member's output too.
// Values span 2^-12 .. 2^12 (a partial sum in another order changes the sum's bits), and every
// eleventh of the output row is a special (NaNs, inf, zeros, a subnormal product); the summed
// row has none (which of two NaNs an FMA returns depends on the compiler's operand order).
TEST(NormPaths, Avx2FusedNextRowEqualsScalarPasses) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2 path on this CPU";
  const TuningParams def = default_tuning_params(core_shape());
  TuningParams near = def;
  near.pass_prefetch_bytes = near.pass_l2_prefetch_bytes = 0;
  const uint16_t specials[] = {0x7FC0, 0xFF81, 0x7F80, 0x0000, 0x8000, 0x0001};
  for (const TuningParams& tp : {def, near})
    for (int64_t h : {1, 31, 63, 64, 65, 127, 128, 1531, 7168})
      for (int64_t offset : {0, 1, 32})
        for (bool stream : {false, true})
          for (int64_t ahead : {int64_t(0), int64_t(1) << 20}) {
            Buffer x(DType::bf16, {2, h}), w(DType::bf16, {h}), y(DType::bf16, {h + 40}), y2(DType::bf16, {h + 40}),
                want_y(DType::bf16, {h + 40});
            fill_random(x, uint64_t(h), 1.0);
            fill_random(w, 3, 2.0);
            auto* xs = x.tensor().data_as<uint16_t>();
            for (int64_t i = 0; i < 2 * h; ++i) {
              const double v = load_as_double(xs, DType::bf16, size_t(i));
              store_from_double(xs, DType::bf16, size_t(i), v * std::ldexp(1.0, int((i * 7919) % 25) - 12));
              if (i < h && i % 11 == 5) xs[i] = specials[(i / 11) % 6];  // the output row's
            }
            poison(y);
            poison(y2);
            poison(want_y);
            const auto* wv = w.tensor().data_as<const uint16_t>();
            auto* out = y.tensor().data_as<uint16_t>() + offset;
            auto* out2 = y2.tensor().data_as<uint16_t>() + offset;
            const float got = kernels::rms_apply_bf16w_next_avx2(xs, 0.37f, wv, out, h, stream, xs + h, ahead, tp);
            kernels::rms_apply_bf16w_avx2(xs, 0.37f, wv, out2, h, stream, {});
            kernels::stream_fence_avx2();
            kernels::scale_by_weight_scalar(xs, DType::bf16, 0.37f, wv, DType::bf16,
                                            want_y.tensor().data_as<uint16_t>() + offset, DType::bf16, h);
            const float want = kernels::sum_squares_scalar(xs + h, DType::bf16, h, tp);
            const std::string what = "h " + std::to_string(h) + " offset " + std::to_string(offset) +
                                     (stream ? " streamed" : "") + " ahead " + std::to_string(ahead) + " prefetch " +
                                     std::to_string(tp.pass_prefetch_bytes);
            EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << what << ": " << got << " vs " << want;
            EXPECT_TRUE(same_bytes(y, want_y)) << what;
            EXPECT_TRUE(same_bytes(y2, want_y)) << what;

            // layernorm's: the next row's shifted sums, and the output with a bias.
            Buffer b(DType::bf16, {h});
            fill_random(b, 4, 1.0);
            const auto* bv = b.tensor().data_as<const uint16_t>();
            poison(y);
            poison(y2);
            poison(want_y);
            const float shift = 0.75f;
            float sd, sd2, want_d, want_d2;
            kernels::layernorm_apply_bf16w_next_avx2(xs, 0.5f, 0.125f, 0.37f, wv, bv, out, h, stream, xs + h, shift,
                                                     &sd, &sd2, ahead, tp);
            kernels::layernorm_apply_bf16w_avx2(xs, 0.5f, 0.125f, 0.37f, wv, bv, out2, h, stream, {});
            kernels::stream_fence_avx2();
            kernels::layernorm_apply_scalar(xs, DType::bf16, 0.5f, 0.125f, 0.37f, wv, bv, DType::bf16,
                                            want_y.tensor().data_as<uint16_t>() + offset, DType::bf16, h);
            kernels::shifted_sums_scalar(xs + h, DType::bf16, shift, h, &want_d, &want_d2, tp);
            EXPECT_EQ(std::memcmp(&sd, &want_d, 4), 0) << what << " layernorm: " << sd << " vs " << want_d;
            EXPECT_EQ(std::memcmp(&sd2, &want_d2, 4), 0) << what << " layernorm: " << sd2 << " vs " << want_d2;
            EXPECT_TRUE(same_bytes(y, want_y)) << what << " layernorm";
            EXPECT_TRUE(same_bytes(y2, want_y)) << what << " layernorm";
          }
}

// The AVX2 residual add with its sum of squares, for every mix of f32 and bf16 rows, into the
// residual itself and into another row: s and the sum bit for bit as add_into then sum_squares
// (the scalar kernels), over lengths with partial blocks of 64.
TEST(NormPaths, Avx2AddSumSquaresEveryTypeMix) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2 path on this CPU";
  const TuningParams tp = default_tuning_params(core_shape());
  for (DType xt : {DType::bf16, DType::f32})
    for (DType rt : {DType::bf16, DType::f32})
      for (int64_t h : {1, 63, 64, 65, 1531})
        for (bool in_place : {true, false}) {
          Buffer x(xt, {h}), r(rt, {h}), want(rt, {h}), s(rt, {h});
          fill_random(x, uint64_t(h), 3.0);
          fill_random(r, uint64_t(h + 1), 3.0);
          std::memcpy(want.data(), r.data(), size_t(r.tensor().nbytes()));
          kernels::add_into_scalar(x.data(), xt, want.data(), rt, h);
          const float want_sum = kernels::sum_squares_scalar(want.data(), rt, h, tp);
          poison(s);
          void* out = in_place ? r.data() : s.data();
          const float got = kernels::add_sum_squares_avx2(x.data(), xt, r.data(), rt, out, h, tp);
          const std::string what = std::string(dtype_name(xt)) + " into " + std::string(dtype_name(rt)) + " h " +
                                   std::to_string(h) + (in_place ? " in place" : "");
          EXPECT_EQ(std::memcmp(&got, &want_sum, 4), 0) << what << ": " << got << " vs " << want_sum;
          EXPECT_TRUE(same_bytes(in_place ? r : s, want)) << what;
        }
}

}  // namespace
}  // namespace sol
