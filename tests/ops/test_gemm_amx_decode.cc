// The AMX decode path (M <= 16, src/ops/gemm/gemm_amx_decode.cc): both kernel orientations
// (the panel kernel on a PackedMatrix or a plain B packed per strip, the rows kernel on a
// plain [N, K] B read where it is stored), on the matrix unit where the CPU has it and on the
// tile model everywhere with AVX-512 (forced here even on an AMX machine, so both run).
// Every M from 1 to 16 and the 17 boundary, N tails around the 16- and 32-column tiles, K odd,
// short and not a multiple of the 32-value chunk, fp8 block scales, the epilogue, int8, and
// the bits the design promises: packed, plain nt and plain nn B alike, any thread count, and
// an M-row call equal to its rows one at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/problem.h"
#include "ops/gemm/reference.h"
#include "ops/random_bytes.h"
#include "sol/copy.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

// The AMX paths this machine can run: the matrix unit (SOL_ISA=amx) and the tile model
// (SOL_ISA=avx512 with the model forced). Each asserts that GEMM takes the AMX path there.
template <class Body>
void for_each_amx_path(Body&& body) {
  const Isa best = cpu_features().best_isa;
  if (best < Isa::avx512) GTEST_SKIP() << "no AVX-512: neither AMX nor its tile model runs here";
  if (best >= Isa::amx) {
    setenv("SOL_ISA", "amx", 1);
    SCOPED_TRACE("AMX on the matrix unit");
    ASSERT_TRUE(gemm_detail::amx_runs(gemm_detail::gemm_kernels(), 1, DType::bf16));
    body();
  }
  setenv("SOL_ISA", "avx512", 1);
  struct Restore {
    ~Restore() {
      gemm_detail::force_amx_model(false);
      unsetenv("SOL_ISA");
    }
  } restore;
  gemm_detail::force_amx_model(true);
  SCOPED_TRACE("AMX on the tile model");
  ASSERT_TRUE(gemm_detail::amx_runs(gemm_detail::gemm_kernels(), 1, DType::bf16));
  ASSERT_TRUE(gemm_detail::amx_runs(gemm_detail::gemm_kernels(), 16, DType::i8));
  body();
}

struct OneThread {
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(0); }
};

// One GEMM's inputs. kind: "bf16", "fp8" (e4m3 x e4m3 with block scales), "bf16xfp8"
// (weight-only), "s8", "u8xs8". B is kept both as [N, K] (nt) and as [K, N] (nn).
struct Operands {
  std::string kind;
  int64_t m = 0, n = 0, k = 0;
  Buffer a, a_scales, b_nt, b_nn, b_scales;
  // With strided(): A and B as views into larger buffers whose padding is poison.
  Buffer a_big, b_nt_big, b_nn_big;
  Tensor a_view, b_nt_view, b_nn_view;
  Tensor A() const { return a_big.bytes() ? a_view : a.tensor(); }
  Tensor Bnt() const { return b_nt_big.bytes() ? b_nt_view : b_nt.tensor(); }
  Tensor Bnn() const { return b_nn_big.bytes() ? b_nn_view : b_nn.tensor(); }
  bool fp8_b() const { return kind == "fp8" || kind == "bf16xfp8"; }
  bool int8() const { return kind == "s8" || kind == "u8xs8"; }
};

Operands make_operands(const std::string& kind, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  Operands o;
  o.kind = kind;
  o.m = m, o.n = n, o.k = k;
  if (kind == "bf16") {
    o.a = Buffer(DType::bf16, {m, k});
    o.b_nt = Buffer(DType::bf16, {n, k});
    fill_random(o.a, seed, 1.0);
    fill_random(o.b_nt, seed + 1, 1.0);
  } else if (o.int8()) {
    o.a = Buffer(kind == "s8" ? DType::i8 : DType::u8, {m, k});
    o.b_nt = Buffer(DType::i8, {n, k});
    fill_bytes(o.a, seed);
    fill_bytes(o.b_nt, seed + 1);
  } else {
    Buffer bf(DType::f32, {n, k});
    fill_random(bf, seed + 1, 0.05);
    float* bp = bf.tensor().data_as<float>();
    // Every 128 x 128 block (and every row) of a different magnitude, so every scale differs.
    for (int64_t i = 0; i < n * k; ++i) bp[i] *= float(1 + (i / k) % 7) * float(1 + (i % k) / 128 % 3);
    o.b_nt = Buffer(DType::f8e4m3, {n, k});
    o.b_scales = Buffer(DType::f32, {(n + 127) / 128, k / 128});
    quant_fp8_per_block(bf, o.b_nt, o.b_scales);
    if (kind == "bf16xfp8") {
      o.a = Buffer(DType::bf16, {m, k});
      fill_random(o.a, seed, 2.0);
    } else {
      Buffer af(DType::f32, {m, k});
      fill_random(af, seed, 3.0);
      for (int64_t i = 0; i < m * k; ++i) af.tensor().data_as<float>()[i] *= float(1 + i / 128 % 5);
      o.a = Buffer(DType::f8e4m3, {m, k});
      o.a_scales = Buffer(DType::f32, {m, k / 128});
      quant_fp8_per_token(af, o.a, o.a_scales);
    }
  }
  const DType bt = o.b_nt.tensor().dtype();
  const size_t es = dtype_size(bt);
  o.b_nn = Buffer(bt, {k, n});
  const auto* src = static_cast<const char*>(o.b_nt.data());
  auto* dst = static_cast<char*>(o.b_nn.data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) std::memcpy(dst + (kk * n + j) * es, src + (j * k + kk) * es, es);
  return o;
}

// The same operands in buffers `pad` columns wider (and B's nn buffer wider along N), the
// padding 0xFF bytes (NaN in bf16 and e4m3, -1 in int8): a read past K or N changes D.
void make_strided(Operands& o, int64_t pad) {
  const auto view_of = [pad](const Buffer& dense, Buffer& big, Tensor& view) {
    const Tensor d = dense.tensor();
    big = Buffer(d.dtype(), {d.shape(0), d.shape(1) + pad});
    poison(big);
    view = big.tensor().slice(1, 0, d.shape(1));
    copy(d, view);
  };
  view_of(o.a, o.a_big, o.a_view);
  view_of(o.b_nt, o.b_nt_big, o.b_nt_view);
  view_of(o.b_nn, o.b_nn_big, o.b_nn_view);
}

enum class Source { packed, nt, nn };
const char* source_name(Source s) { return s == Source::packed ? "packed" : s == Source::nt ? "nt" : "nn"; }

struct Spec {
  DType out = DType::f32;
  Source source = Source::packed;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, silu = false, in_place = false;
};

std::string describe(const Operands& o, const Spec& s, int64_t r0 = 0, int64_t r1 = -1) {
  return o.kind + " m=" + std::to_string(o.m) + " n=" + std::to_string(o.n) + " k=" + std::to_string(o.k) +
         " rows " + std::to_string(r0) + ".." + std::to_string(r1 < 0 ? o.m : r1) + " " + source_name(s.source) +
         " -> " + std::string(dtype_name(s.out)) + " alpha=" + std::to_string(s.alpha) +
         " beta=" + std::to_string(s.beta) + (s.bias ? " bias" : "") + (s.silu ? " silu" : "") +
         (s.in_place ? " in place" : "");
}

// Rows [r0, r1) of A into D, a view of rows 1..m of a poisoned buffer with a row above and
// below and 3 columns to the right; checks nothing outside D was written, and with `check`
// compares D with the fp64 reference (int8 exactly). Returns D's [r1 - r0, n] values.
Buffer run(const Operands& o, const Spec& s, bool check, int64_t r0 = 0, int64_t r1 = -1) {
  if (r1 < 0) r1 = o.m;
  const int64_t m = r1 - r0, n = o.n, ld = n + 3;
  const Tensor a = o.A().slice(0, r0, r1);
  const Tensor a_scales = o.kind == "fp8" ? o.a_scales.tensor().slice(0, r0, r1) : Tensor();
  Buffer d_buf(s.out, {m + 2, ld}), c_buf(s.out, {m, n}), bias(DType::f32, {n});
  const Tensor d = d_buf.tensor().slice(0, 1, m + 1).slice(1, 0, n);
  poison(d_buf);
  if (s.beta == 0.0f && !o.int8()) poison(c_buf);
  else fill_random(c_buf, 77 + uint64_t(r0), o.int8() ? 1e6 : 1.0);
  if (s.in_place) copy(c_buf.tensor(), d);
  fill_random(bias, 78, 1.0);

  GemmOptions opt;
  opt.alpha = s.alpha;
  opt.beta = s.beta;
  opt.c = s.in_place ? nullptr : &c_buf.tensor();
  opt.bias = s.bias ? &bias.tensor() : nullptr;
  opt.activation = s.silu ? Activation::silu : Activation::none;
  opt.a_scales = o.kind == "fp8" ? &a_scales : nullptr;
  const Tensor* b_scales = o.fp8_b() ? &o.b_scales.tensor() : nullptr;
  if (s.source == Source::packed) {
    gemm(a, pack_b(o.Bnt(), Layout::nt, b_scales), d, opt);
  } else {
    opt.layout = s.source == Source::nt ? Layout::nt : Layout::nn;
    opt.b_scales = b_scales;
    gemm(a, s.source == Source::nt ? o.Bnt() : o.Bnn(), d, opt);
  }

  const size_t es = dtype_size(s.out);
  const auto* bytes = static_cast<const unsigned char*>(d_buf.data());
  int64_t outside = 0;
  for (int64_t i = 0; i < m + 2; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      if (i >= 1 && i <= m && j < n) continue;
      for (size_t byte = 0; byte < es; ++byte) outside += bytes[(i * ld + j) * int64_t(es) + int64_t(byte)] != 0xFF;
    }
  EXPECT_EQ(outside, 0) << describe(o, s, r0, r1) << ": wrote outside D";
  Buffer out(s.out, {m, n});
  copy(d, out);
  if (!check) return out;

  Buffer ref(o.int8() ? DType::i32 : DType::f32, {m, n});
  reference_gemm(a, o.b_nt, Layout::nt, &c_buf.tensor(), s.alpha, s.beta, s.bias ? &bias.tensor() : nullptr,
                 opt.activation, ref, opt.a_scales, b_scales);
  if (o.int8()) {
    const CheckResult r = compare_bitwise(out, ref);
    EXPECT_TRUE(r.pass) << describe(o, s, r0, r1) << ": " << r.detail;
  } else {
    const CheckResult r = compare_relative(out, ref, s.out == DType::bf16 ? 1e-2 : 2e-5);
    EXPECT_TRUE(r.pass) << describe(o, s, r0, r1) << ": " << r.detail;
  }
  return out;
}

bool same_bits(const Buffer& x, const Buffer& y) { return compare_bitwise(x, y).pass; }

// Checks D against the reference from a packed B, then that plain nt and nn B give its bits.
void check_all_sources(const Operands& o, Spec s) {
  s.source = Source::packed;
  const Buffer packed = run(o, s, true);
  for (Source src : {Source::nt, Source::nn}) {
    s.source = src;
    EXPECT_TRUE(same_bits(packed, run(o, s, false))) << describe(o, s) << ": not the bits of a packed B";
  }
}

// Every M of the decode path and the first past it, N tails around the 16-row blocks of W
// and the 32-column strips, K of one value, odd, short of a chunk and past it.
TEST(GemmAmxDecode, EveryMWithTailsBf16) {
  OneThread one;
  for_each_amx_path([] {
    for (int64_t m = 1; m <= 17; ++m)
      for (int64_t n : {1, 17, 47})
        for (int64_t k : {1, 31, 64, 97}) {
          const Operands o = make_operands("bf16", m, n, k, uint64_t(m * 1000 + n * 10 + k));
          check_all_sources(o, Spec{});
        }
  });
}

// bf16 D, K over many chunks (the side stream reaches the next strip) and N past 16 but not
// 32: the rows kernel assembles the second block of W; the panel kernel reads it padded.
TEST(GemmAmxDecode, LongKAndBf16Output) {
  OneThread one;
  for_each_amx_path([] {
    for (int64_t m : {1, 9, 16})
      for (int64_t n : {24, 70}) {
        const Operands o = make_operands("bf16", m, n, 1031, uint64_t(m + n));
        Spec s;
        s.out = DType::bf16;
        check_all_sources(o, s);
      }
  });
}

// An M-row call gives each row the bits of that row on its own (the tiles' rows, or columns
// in the rows orientation, never mix).
TEST(GemmAmxDecode, RowsOneAtATimeAreTheSameBits) {
  OneThread one;
  for_each_amx_path([] {
    for (const char* kind : {"bf16", "fp8", "bf16xfp8"}) {
      const Operands o = make_operands(kind, 16, 47, std::string(kind) == "bf16" ? 97 : 256, 5);
      for (Source src : {Source::packed, Source::nt}) {
        Spec s;
        s.source = src;
        const Buffer all = run(o, s, false);
        const size_t row_bytes = size_t(o.n) * 4;
        for (int64_t i = 0; i < o.m; ++i) {
          const Buffer row = run(o, s, false, i, i + 1);
          EXPECT_EQ(std::memcmp(static_cast<const char*>(all.data()) + size_t(i) * row_bytes, row.data(), row_bytes), 0)
              << describe(o, s) << ": row " << i << " alone differs";
        }
      }
    }
  });
}

// fp8 x fp8 (per-token A scales: the rows kernel takes them as lanes) and weight-only bf16 x
// fp8, one and two 128-wide scale groups, N within and past one 128-row scale block.
TEST(GemmAmxDecode, Fp8BlockScales) {
  OneThread one;
  for_each_amx_path([] {
    for (const char* kind : {"fp8", "bf16xfp8"})
      for (int64_t m : {1, 5, 16, 17})
        for (int64_t n : {1, 33, 130})
          for (int64_t k : {128, 256})
            for (DType out : {DType::f32, DType::bf16}) {
              const Operands o = make_operands(kind, m, n, k, uint64_t(m * 7 + n + k));
              Spec s;
              s.out = out;
              check_all_sources(o, s);
            }
  });
}

// A NaN A scale (row 6, group 1) reaches only row 6; a NaN B scale (rows 128.. of B, group 0)
// only columns 128..: the scales land on their own rows and columns in both orientations.
TEST(GemmAmxDecode, Fp8NanScalesReachOnlyTheirRowsAndColumns) {
  OneThread one;
  for_each_amx_path([] {
    Operands o = make_operands("fp8", 9, 161, 256, 41);
    o.a_scales.tensor().data_as<float>()[6 * 2 + 1] = std::nanf("");
    o.b_scales.tensor().data_as<float>()[1 * 2 + 0] = std::nanf("");
    for (Source src : {Source::packed, Source::nt, Source::nn}) {
      Spec s;
      s.source = src;
      const Buffer d = run(o, s, false);
      const float* p = d.tensor().data_as<const float>();
      for (int64_t i = 0; i < o.m; ++i)
        for (int64_t j = 0; j < o.n; ++j)
          EXPECT_EQ(std::isnan(p[i * o.n + j]), i == 6 || j >= 128)
              << describe(o, s) << ": row " << i << " column " << j << " = " << p[i * o.n + j];
    }
  });
}

// alpha, beta (C and in place), bias and SiLU into f32 and bf16 D, on both orientations.
TEST(GemmAmxDecode, Epilogue) {
  OneThread one;
  struct Ep {
    float alpha, beta;
    bool bias, silu, in_place;
  };
  for_each_amx_path([] {
    for (const char* kind : {"bf16", "fp8"})
      for (int64_t m : {1, 16}) {
        const Operands o = make_operands(kind, m, 47, std::string(kind) == "bf16" ? 97 : 128, uint64_t(m));
        for (DType out : {DType::f32, DType::bf16})
          for (Ep ep : {Ep{-0.375f, 0.0f, false, false, false}, Ep{2.5f, 0.0f, true, false, false},
                        Ep{0.5f, 0.0f, false, true, false}, Ep{-1.5f, 0.75f, false, false, false},
                        Ep{1.25f, -1.0f, true, true, false}, Ep{1.0f, 1.0f, true, false, true}}) {
            Spec s;
            s.out = out;
            s.alpha = ep.alpha;
            s.beta = ep.beta;
            s.bias = ep.bias;
            s.silu = ep.silu;
            s.in_place = ep.in_place;
            check_all_sources(o, s);
          }
      }
  });
}

// int8 through the panel kernel: s8 x s8 (TDPBSSD) and u8 x s8 (TDPBUSD), exact, K not a
// multiple of the 4-value quad or the 64-value chunk, beta 0 and 1.
TEST(GemmAmxDecode, Int8Exact) {
  OneThread one;
  for_each_amx_path([] {
    for (const char* kind : {"s8", "u8xs8"})
      for (int64_t m : {1, 3, 16, 17})
        for (int64_t n : {1, 33, 70})
          for (int64_t k : {1, 5, 64, 131})
            for (float beta : {0.0f, 1.0f}) {
              const Operands o = make_operands(kind, m, n, k, uint64_t(m + n * 3 + k));
              Spec s;
              s.out = DType::i32;
              s.beta = beta;
              check_all_sources(o, s);
            }
  });
}

// A and B read where they are stored with row strides past K (and nn B's past N), the padding
// poison: nothing past K may reach D (the rows kernel assembles a partial chunk of W rather
// than load past the row), and the bits are those of dense operands.
TEST(GemmAmxDecode, StridedOperandsPoisonedPadding) {
  OneThread one;
  for_each_amx_path([] {
    for (const char* kind : {"bf16", "bf16xfp8", "fp8", "u8xs8"})
      for (int64_t m : {1, 7, 16})
        for (int64_t k : {31, 97, 256}) {
          const bool fp8 = std::string(kind).find("fp8") != std::string::npos;
          if (fp8 != (k == 256)) continue;  // fp8: K % 128
          Operands o = make_operands(kind, m, 47, k, uint64_t(m * 5 + k));
          for (Source src : {Source::packed, Source::nt, Source::nn}) {
            Spec s;
            s.source = src;
            s.out = o.int8() ? DType::i32 : DType::f32;
            const Buffer dense = run(o, s, false);
            make_strided(o, 9);
            EXPECT_TRUE(same_bits(dense, run(o, s, true))) << describe(o, s) << ": strided operands differ";
            o.a_big = Buffer(), o.b_nt_big = Buffer(), o.b_nn_big = Buffer();
          }
        }
  });
}

// Threads split N into strips: 1, 2 and 3 threads give the same bits, for each source, with
// several strips per thread and a tail strip.
TEST(GemmAmxDecode, ThreadCountBitwise) {
  for_each_amx_path([] {
    for (const char* kind : {"bf16", "fp8", "s8"})
      for (int64_t m : {1, 16}) {
        const Operands o = make_operands(kind, m, 32 * 9 + 5, std::string(kind) == "fp8" ? 256 : 97, uint64_t(m + 3));
        for (Source src : {Source::packed, Source::nt, Source::nn}) {
          Spec s;
          s.source = src;
          s.out = o.int8() ? DType::i32 : DType::bf16;
          set_num_threads(1);
          const Buffer one = run(o, s, true);
          for (int threads : {2, 3}) {
            set_num_threads(threads);
            EXPECT_TRUE(same_bits(one, run(o, s, false))) << describe(o, s) << ": 1 vs " << threads << " threads";
          }
          set_num_threads(0);
        }
      }
  });
}

}  // namespace
}  // namespace sol
