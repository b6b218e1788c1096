// Adversarial tests for the session-5 decode changes of the blocked GEMM (docs/perf/gemm.md,
// "Session 5"): the next-panel L2 stream of two-panel decode (M 13-16), the fp8 decode that
// widens each B panel once and hands the bf16 panel to the second tile (GemmTile::b_widened,
// only while the kept panel fits the L2), and the tiles' short end (one K block, alpha only;
// the int8 direct store). Around each: the M boundaries 12/13 and 16/17, N tails (1, 31, 33),
// several column blocks and two threads, K at and past the kept panel's former limit, fp8 special codes,
// epilogue combinations, D with a leading dimension and NaN poison.
//
// Where the design promises identical bits they are compared bit for bit: 1 vs 2 threads, packed
// vs plain B (a plain fp8 B is widened into the workspace before the tile: no keeping), and an
// M-row decode vs the same rows run one at a time (M = 1: one A panel, no second tile).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/random_bytes.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/common/rows.h"
#include "ops/gemm/reference.h"
#include "ops/gemm_paths.h"
#include "sol/copy.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_gemm_path;

// The inputs of one GEMM, B stored nt ([N, K], as decode weights are).
// kind: "f32", "bf16", "fp8" (e4m3 x e4m3, block scales), "bf16xfp8" (weight-only), "s8", "u8xs8".
struct Operands {
  std::string kind;
  Buffer a, a_scales, b, b_scales;
  bool fp8_b() const { return kind == "fp8" || kind == "bf16xfp8"; }
  bool int8() const { return kind == "s8" || kind == "u8xs8"; }
};


Operands make_operands(const std::string& kind, int64_t m, int64_t n, int64_t k, uint64_t seed,
                       ScaleFormat format = ScaleFormat::f32) {
  Operands o;
  o.kind = kind;
  if (kind == "f32" || kind == "bf16") {
    const DType t = kind == "f32" ? DType::f32 : DType::bf16;
    o.a = Buffer(t, {m, k});
    o.b = Buffer(t, {n, k});
    fill_random(o.a, seed, 1.0);
    fill_random(o.b, seed + 1, 1.0);
  } else if (o.int8()) {
    o.a = Buffer(kind == "s8" ? DType::i8 : DType::u8, {m, k});
    o.b = Buffer(DType::i8, {n, k});
    fill_bytes(o.a, seed);
    fill_bytes(o.b, seed + 1);
  } else {
    QuantOptions q;
    q.scale = format;
    Buffer bf(DType::f32, {n, k});
    fill_random(bf, seed + 1, 0.05);
    float* bp = bf.tensor().data_as<float>();
    // Rows and 128-blocks of different magnitude, so that every scale differs.
    for (int64_t i = 0; i < n * k; ++i) bp[i] *= float(1 + (i / k) % 7) * float(1 + (i % k) / 128 % 3);
    o.b = Buffer(DType::f8e4m3, {n, k});
    o.b_scales = Buffer(DType::f32, {(n + 127) / 128, k / 128});
    quant_fp8_per_block(bf, o.b, o.b_scales, q);
    if (kind == "bf16xfp8") {
      o.a = Buffer(DType::bf16, {m, k});
      fill_random(o.a, seed, 2.0);
    } else {
      Buffer af(DType::f32, {m, k});
      fill_random(af, seed, 3.0);
      o.a = Buffer(DType::f8e4m3, {m, k});
      o.a_scales = Buffer(DType::f32, {m, k / 128});
      quant_fp8_per_token(af, o.a, o.a_scales, q);
    }
  }
  return o;
}

struct Spec {
  DType out = DType::f32;
  bool packed = true;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, silu = false;
  int64_t pad = 0;  // D's (and C's) leading dimension is n + pad
};

std::string describe(const Operands& o, const Spec& s) {
  const Tensor& a = o.a.tensor();
  return o.kind + " m=" + std::to_string(a.shape(0)) + " n=" + std::to_string(o.b.tensor().shape(0)) +
         " k=" + std::to_string(a.shape(1)) + " -> " + std::string(dtype_name(s.out)) +
         (s.packed ? " packed" : " plain") + " alpha=" + std::to_string(s.alpha) + " beta=" + std::to_string(s.beta) +
         (s.bias ? " bias" : "") + (s.silu ? " silu" : "") + " pad=" + std::to_string(s.pad);
}

// Runs rows [r0, r1) of A (all of it by default) into D, a view of rows 1..m of a buffer with a
// row above and below and `pad` columns to the right (so D starts unaligned), all of it
// poisoned (NaN / 0xFF bytes) first; checks nothing outside D was written and returns D's
// [r1 - r0, n] values. With `check`, compares them with the fp64 reference. C is random; with
// beta = 0 it is NaN instead (beta = 0 must not read it). in_place: C is D's old contents
// (GemmOptions::c null), random.
Buffer run(const Operands& o, const Spec& s, bool check, int64_t r0 = 0, int64_t r1 = -1, bool in_place = false) {
  const int64_t m_all = o.a.tensor().shape(0), n = o.b.tensor().shape(0);
  if (r1 < 0) r1 = m_all;
  const int64_t m = r1 - r0, ld = n + s.pad;
  const Tensor a = o.a.tensor().slice(0, r0, r1);
  const Tensor a_scales = o.kind == "fp8" ? o.a_scales.tensor().slice(0, r0, r1) : Tensor();
  Buffer d_buf(s.out, {m + 2, ld}), c_buf(s.out, {m, ld}), bias(DType::f32, {n});
  const Tensor d = d_buf.tensor().slice(0, 1, m + 1).slice(1, 0, n), c = c_buf.tensor().slice(1, 0, n);
  poison(d_buf);
  if (s.beta == 0.0f && !o.int8()) poison(c_buf);
  else fill_random(c_buf, 77 + uint64_t(m), o.int8() ? 1e6 : 1.0);
  if (in_place) copy(c, d);
  fill_random(bias, 78, 1.0);

  GemmOptions opt;
  opt.layout = Layout::nt;
  opt.alpha = s.alpha;
  opt.beta = s.beta;
  opt.c = in_place ? nullptr : &c;
  opt.bias = s.bias ? &bias.tensor() : nullptr;
  opt.activation = s.silu ? Activation::silu : Activation::none;
  opt.a_scales = o.kind == "fp8" ? &a_scales : nullptr;
  if (s.packed) {
    gemm(a, pack_b(o.b, Layout::nt, o.fp8_b() ? &o.b_scales.tensor() : nullptr), d, opt);
  } else {
    opt.b_scales = o.fp8_b() ? &o.b_scales.tensor() : nullptr;
    gemm(a, o.b, d, opt);
  }

  const size_t es = dtype_size(s.out);
  const auto* bytes = static_cast<const unsigned char*>(d_buf.data());
  int64_t outside = 0, first_i = 0, first_j = 0;
  for (int64_t i = 0; i < m + 2; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      if (i >= 1 && i <= m && j < n) continue;
      const auto* p = bytes + (i * ld + j) * int64_t(es);
      for (size_t byte = 0; byte < es; ++byte)
        if (p[byte] != 0xFF && outside++ == 0) first_i = i - 1, first_j = j;
    }
  EXPECT_EQ(outside, 0) << describe(o, s) << ": wrote outside D, first at row " << first_i << " column " << first_j;
  Buffer out(s.out, {m, n});
  copy(d, out);
  if (!check) return out;

  Buffer ref(o.int8() ? DType::i32 : DType::f32, {m, n});
  reference_gemm(a, o.b, Layout::nt, &c, s.alpha, s.beta, s.bias ? &bias.tensor() : nullptr,
                 s.silu ? Activation::silu : Activation::none, ref, o.kind == "fp8" ? &a_scales : nullptr,
                 o.fp8_b() ? &o.b_scales.tensor() : nullptr);
  if (o.int8()) {
    CheckResult r = compare_bitwise(out, ref);
    EXPECT_TRUE(r.pass) << describe(o, s) << (in_place ? " in place" : "") << ": " << r.detail;
  } else {
    const double tol = s.out == DType::bf16 ? 1e-2 : o.kind == "f32" ? 1e-5 : 2e-5;
    CheckResult r = compare_relative(out, ref, tol);
    EXPECT_TRUE(r.pass) << describe(o, s) << (in_place ? " in place" : "") << ": " << r.detail;
    EXPECT_LT(gemm_diff_metric(out, ref), 1e-3) << describe(o, s);
  }
  return out;
}

// Every row of an M-row GEMM run on its own (M = 1), stacked.
Buffer run_row_by_row(const Operands& o, const Spec& s) {
  const int64_t m = o.a.tensor().shape(0), n = o.b.tensor().shape(0);
  Buffer all(s.out, {m, n});
  const size_t row_bytes = size_t(n) * dtype_size(s.out);
  for (int64_t i = 0; i < m; ++i) {
    Buffer row = run(o, s, false, i, i + 1);
    std::memcpy(static_cast<char*>(all.data()) + size_t(i) * row_bytes, row.data(), row_bytes);
  }
  return all;
}

bool same_bits(const Buffer& x, const Buffer& y) { return compare_bitwise(x, y).pass; }

// One thread for the tests that are not about threads: hundreds of small GEMMs, where waking a
// second thread on a loaded 2-core machine costs more than the GEMM.
struct OneThread {
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(0); }
};

// ---- 1, 2: fp8 decode, the kept bf16 panel ---------------------------------------------

// Every decode M around the two-panel range, N tails around the 32-column panels, K one and two
// scale groups; fp8 x fp8 and weight-only bf16 x fp8; bf16 and f32 D. Each result: against the
// reference, bit for bit against a plain B (widened before the tile, nothing kept) and against
// the rows one at a time (one panel, nothing kept).
TEST(GemmDecodeEdges, Fp8DecodeEveryMAroundTwoPanels) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for (const char* kind : {"fp8", "bf16xfp8"})
      for (int64_t m : {12, 13, 14, 15, 16, 17})
        for (int64_t n : {1, 31, 33, 97})
          for (int64_t k : {128, 256}) {
            const Operands o = make_operands(kind, m, n, k, uint64_t(m * 131 + n * 7 + k));
            for (DType out : {DType::bf16, DType::f32}) {
              Spec s;
              s.out = out;
              s.pad = 3;
              const Buffer packed = run(o, s, true);
              s.packed = false;
              const Buffer plain = run(o, s, false);
              EXPECT_TRUE(same_bits(packed, plain)) << describe(o, s) << ": packed vs plain B";
              if (m <= 16) {
                s.packed = true;
                EXPECT_TRUE(same_bits(packed, run_row_by_row(o, s))) << describe(o, s) << ": vs one row at a time";
              }
            }
          }
  });
}

// Decode with up to kGemmPairMaxRows (4) rows over a packed bf16, fp8 or int8 B runs two
// column panels per kernel call (GemmKernels::tile_bf16_pair, tile_s8_pair). Around it: M 1-6
// (5 and 6 take one panel per call), N with a panel left over, a partial last panel or one
// panel only, K in one and in two chunks (bf16 and fp8), the epilogue's terms (alpha,
// bias, SiLU; C would differ per call here), D unaligned. Each result: against the reference,
// and bit for bit against the same rows of a 13-row call, whose tiles take one panel at a time.
TEST(GemmDecodeEdges, PairedPanelsEveryMAroundTheLimit) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for (const char* kind : {"bf16", "fp8", "bf16xfp8", "s8", "u8xs8"})
      for (auto [n, k] : {std::array<int64_t, 2>{32, 256}, {33, 4352}, {97, 256}, {161, 256}}) {
        const Operands o = make_operands(kind, 13, n, k, uint64_t(n * 7 + k));
        for (bool epilogue : {false, true}) {
          if (o.int8() && epilogue) continue;  // int8 D is the sums (plus C)
          Spec s;
          s.out = o.int8() ? DType::i32 : epilogue ? DType::bf16 : DType::f32;
          s.pad = 3;
          if (epilogue) s.alpha = 0.5f, s.bias = true, s.silu = true;
          const Buffer all = run(o, s, false);
          for (int64_t m = 1; m <= 6; ++m) {
            const Buffer few = run(o, s, true, 0, m);
            EXPECT_EQ(std::memcmp(few.data(), all.data(), few.bytes()), 0) << describe(o, s) << " rows 0.." << m;
          }
        }
      }
  });
}

// The kept panel was k_steps x 128 bytes = 64 K bytes, used up to the L2's size (at least
// 256 KiB). Since decode runs in K chunks of at most 2048 steps, a kept chunk is at most 256 KiB
// and both K here keep, in different chunk counts. At the largest K that once kept and the
// smallest that did not, the results must be the same bits as the plain B and the rows one at
// a time, and match the reference.
TEST(GemmDecodeEdges, Fp8DecodeAtAndPastTheKeptPanelLimit) {
  const int64_t limit = std::max<int64_t>(cpu_features().l2_bytes, 256 << 10);
  const int64_t k_keep = limit / 64 / 128 * 128, k_off = k_keep + 128;
  ASSERT_GT(k_off * 64, limit);
  for (int64_t k : {k_keep, k_off})
    for (int64_t m : {13, 16}) {
      const Operands o = make_operands(m == 13 ? "fp8" : "bf16xfp8", m, 33, k, uint64_t(k + m));
      Spec s;
      s.out = DType::bf16;
      s.pad = 1;
      const Buffer packed = run(o, s, true);
      s.packed = false;
      EXPECT_TRUE(same_bits(packed, run(o, s, false))) << describe(o, s) << ": packed vs plain";
      s.packed = true;
      EXPECT_TRUE(same_bits(packed, run_row_by_row(o, s))) << describe(o, s) << ": vs one row at a time";
    }
}

// UE8M0 (power-of-two) scales, and fp8 codes the widening must carry exactly: NaN (0x7F, 0xFF)
// and subnormals (0x01..0x07, 0x81..0x87). A NaN code in B's column j makes all of column j NaN
// (rows of both panels: the second reads the kept panel), and nothing else.
TEST(GemmDecodeEdges, Fp8SpecialCodesAndUe8m0ThroughTheKeptPanel) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for (const char* kind : {"fp8", "bf16xfp8"})
      for (int64_t m : {13, 16}) {
        const int64_t n = 70, k = 256;
        Operands o = make_operands(kind, m, n, k, uint64_t(m + 5), ScaleFormat::ue8m0);
        auto* b = static_cast<uint8_t*>(o.b.data());
        // Subnormal codes spread over every column and both K groups.
        for (int64_t j = 0; j < n; ++j)
          for (int64_t kk = j % 5; kk < k; kk += 9) b[j * k + kk] = uint8_t((kk % 7 + 1) | (kk % 2 ? 0x80 : 0));
        Spec s;
        s.out = DType::f32;
        const Buffer sub = run(o, s, true);
        s.packed = false;
        EXPECT_TRUE(same_bits(sub, run(o, s, false))) << describe(o, s) << " subnormals: packed vs plain";

        // NaN codes: column 17 (upper half of panel 0's second vector), column 40 (panel 1), 69 (tail).
        b[17 * k + 3] = 0x7F;
        b[40 * k + 200] = 0xFF;
        b[69 * k + 127] = 0x7F;
        for (bool packed : {true, false}) {
          s.packed = packed;
          const Buffer d = run(o, s, false);
          const float* p = d.tensor().data_as<const float>();
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              EXPECT_EQ(std::isnan(p[i * n + j]), j == 17 || j == 40 || j == 69)
                  << describe(o, s) << " NaN code: row " << i << " column " << j << " = " << p[i * n + j];
        }
      }
  });
}

// ---- 1: several column blocks and threads ------------------------------------------------

// Decode splits N over the threads and runs 64-column blocks (NC) inside each; the next-panel
// request crosses blocks (p.packed->at(pc, col + 32) while col + 32 < the thread's end). Results
// for 1 and 2 threads and for packed and plain B must be the same bits, for every input type;
// K = 255 leaves a partial last K step (bf16 pairs, int8 quads, f32 single values).
TEST(GemmDecodeEdges, ColumnBlocksAndThreadsBitwiseEveryType) {
  for (const char* kind : {"f32", "bf16", "fp8", "bf16xfp8", "s8", "u8xs8"})
    for (int64_t m : {13, 16})
      for (int64_t n : {64 * 7 + 33, 64 * 2 + 31})
        for (int64_t k : {256, 255}) {
          if (k == 255 && std::string(kind).find("fp8") != std::string::npos) continue;  // fp8: K % 128
          const Operands o = make_operands(kind, m, n, k, uint64_t(n + m));
          Spec s;
          s.out = std::string(kind) == "f32" ? DType::f32 : o.int8() ? DType::i32 : DType::bf16;
          s.pad = 2;
          set_num_threads(1);
          const Buffer one = run(o, s, true);
          set_num_threads(2);
          const Buffer two = run(o, s, false);
          s.packed = false;
          const Buffer plain_two = run(o, s, false);
          set_num_threads(0);
          EXPECT_TRUE(same_bits(one, two)) << describe(o, s) << ": 1 vs 2 threads";
          EXPECT_TRUE(same_bits(one, plain_two)) << describe(o, s) << ": packed vs plain";
        }
}

// ---- 3: the tiles' short end and the general one -------------------------------------------

// alpha alone (the short end), alpha with beta, bias or SiLU (the general end) on decode and
// just past it, f32 and bf16 D with a leading dimension, for each floating input type. K = 256
// is one K block; K = 2176 (bf16, f32: KC = 2048 past decode) is two for M = 17, so the short
// end must not be taken there.
TEST(GemmDecodeEdges, EpilogueCombinationsShortAndGeneralEnd) {
  OneThread one_thread;
  struct Ep {
    float alpha, beta;
    bool bias, silu;
  };
  for_each_gemm_path([] {
    for (const char* kind : {"f32", "bf16", "fp8", "bf16xfp8"})
      for (int64_t m : {1, 13, 16, 17})
        for (int64_t k : {256, 2176}) {
          if (k == 2176 && m != 17 && m != 16) continue;
          const Operands o = make_operands(kind, m, 47, k, uint64_t(m * 3 + k));
          for (DType out : {DType::f32, DType::bf16}) {
            if (std::string(kind) == "f32" && out == DType::bf16) continue;
            for (Ep ep : {Ep{-0.375f, 0.0f, false, false}, Ep{1.0f, 0.0f, false, false}, Ep{2.5f, 0.0f, true, false},
                          Ep{0.5f, 0.0f, false, true}, Ep{-1.5f, 0.75f, false, false}, Ep{1.25f, -1.0f, true, true}}) {
              Spec s;
              s.out = out;
              s.alpha = ep.alpha;
              s.beta = ep.beta;
              s.bias = ep.bias;
              s.silu = ep.silu;
              s.pad = 5;
              s.packed = m != 1;  // plain B for M = 1 (packed on the fly), packed otherwise
              run(o, s, true);
            }
          }
        }
  });
}

// The int8 short end stores the sums straight into D when beta is 0 (C, here huge, never read);
// with beta = 1 it takes the general end. u8 x s8 and s8 x s8 (the -128 column-sum correction),
// decode and tall M, N tails, one and two K blocks (KC 4096 past decode), packed and plain.
TEST(GemmDecodeEdges, Int8DirectStoreExactWithTails) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for (const char* kind : {"s8", "u8xs8"})
      for (int64_t m : {1, 13, 16, 17, 40})
        for (int64_t n : {1, 31, 33})
          for (int64_t k : {4, 100, 4100}) {
            if (k == 4100 && n != 33) continue;
            const Operands o = make_operands(kind, m, n, k, uint64_t(m + n + k));
            for (float beta : {0.0f, 1.0f})
              for (bool packed : {true, false}) {
                Spec s;
                s.out = DType::i32;
                s.beta = beta;
                s.packed = packed;
                s.pad = 3;
                run(o, s, true);
              }
          }
  });
}

// NaN scales through the kept panel: a NaN A scale (row 14, the second panel, second K group)
// makes that row NaN; a NaN B scale (N block 1, K group 0) makes columns 128.. NaN; nothing else.
TEST(GemmDecodeEdges, Fp8NanScalesReachOnlyTheirRowsAndColumns) {
  OneThread one_thread;
  for_each_gemm_path([] {
    const int64_t m = 16, n = 161, k = 256;
    Operands o = make_operands("fp8", m, n, k, 41);
    o.a_scales.tensor().data_as<float>()[14 * 2 + 1] = std::nanf("");
    o.b_scales.tensor().data_as<float>()[1 * 2 + 0] = std::nanf("");
    for (bool packed : {true, false}) {
      Spec s;
      s.out = DType::f32;
      s.packed = packed;
      s.pad = 1;
      const Buffer d = run(o, s, false);
      const float* p = d.tensor().data_as<const float>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          EXPECT_EQ(std::isnan(p[i * n + j]), i == 14 || j >= 128)
              << describe(o, s) << ": row " << i << " column " << j << " = " << p[i * n + j];
    }
  });
}

// C = D in place (GemmOptions::c null) on decode: beta = 0 must not read D's old contents (NaN
// here) on the short end, beta != 0 reads them on the general end.
TEST(GemmDecodeEdges, InPlaceDecodeEveryType) {
  OneThread one_thread;
  for_each_gemm_path([] {
    for (const char* kind : {"f32", "bf16", "fp8", "bf16xfp8", "s8", "u8xs8"})
      for (int64_t m : {13, 16}) {
        const Operands o = make_operands(kind, m, 33, 256, uint64_t(m + 3));
        for (float beta : {0.0f, 1.0f}) {
          Spec s;
          s.out = std::string(kind) == "f32" ? DType::f32 : o.int8() ? DType::i32 : DType::bf16;
          s.beta = o.int8() ? beta : beta * 0.5f;
          s.alpha = o.int8() ? 1.0f : 1.5f;
          s.pad = 2;
          run(o, s, true, 0, -1, true);
        }
      }
  });
}

// MoE decode: each expert's rows are one GEMM (masked layout), so experts with 13-16 valid rows
// take the two-panel decode with the kept fp8 panel. Packed experts must give the bits of plain
// ones and of one gemm per expert; rows at or past masked_m stay untouched.
TEST(GemmDecodeEdges, MaskedGroupedDecodeWithTwoPanels) {
  OneThread one_thread;
  const int64_t groups = 4, max_m = 16, n = 97, k = 256;
  const int32_t valid[groups] = {16, 13, 0, 12};
  for (const char* kind : {"fp8", "bf16xfp8"}) {
    const bool fp8_a = std::string(kind) == "fp8";
    std::vector<Operands> ex;
    for (int64_t g = 0; g < groups; ++g) ex.push_back(make_operands(kind, max_m, n, k, uint64_t(50 + g)));
    Buffer a(ex[0].a.tensor().dtype(), {groups, max_m, k}), sa(DType::f32, {groups, max_m, k / 128});
    Buffer b(DType::f8e4m3, {groups, n, k}), sb(DType::f32, {groups, 1, k / 128});
    std::vector<PackedMatrix> packed;
    for (int64_t g = 0; g < groups; ++g) {
      copy(ex[size_t(g)].a, plane(a, g));
      if (fp8_a) copy(ex[size_t(g)].a_scales, plane(sa, g));
      copy(ex[size_t(g)].b, plane(b, g));
      copy(ex[size_t(g)].b_scales, plane(sb, g));
      packed.push_back(pack_b(ex[size_t(g)].b, Layout::nt, &ex[size_t(g)].b_scales.tensor()));
    }
    Buffer masked(DType::i32, {groups}), d_packed(DType::bf16, {groups, max_m, n}), d_plain(DType::bf16, {groups, max_m, n});
    std::memcpy(masked.data(), valid, sizeof(valid));
    poison(d_packed);
    poison(d_plain);
    GroupedGemmOptions opt;
    opt.a_scales = fp8_a ? &sa.tensor() : nullptr;
    grouped_gemm_masked(a, packed, masked, d_packed, opt);
    opt.b_scales = &sb.tensor();
    grouped_gemm_masked(a, b, masked, d_plain, opt);
    EXPECT_TRUE(same_bits(d_packed, d_plain)) << kind << ": packed vs plain experts";
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t rows = valid[g];
      const auto* bytes = static_cast<const uint16_t*>(plane(d_packed, g).data());
      for (int64_t i = rows * n; i < max_m * n; ++i)
        ASSERT_EQ(bytes[i], 0xFFFF) << kind << ": expert " << g << " wrote masked row " << i / n;
      if (rows == 0) continue;
      Spec s;
      s.out = DType::bf16;
      const Buffer one = run(ex[size_t(g)], s, true, 0, rows);
      Buffer mine(DType::bf16, {rows, n});
      copy(plane(d_packed, g).slice(0, 0, rows), mine);
      EXPECT_TRUE(same_bits(mine, one)) << kind << ": expert " << g << " (" << rows << " rows) vs one gemm";
    }
  }
}

}  // namespace
}  // namespace sol

namespace sol {
namespace {

// ---- decode's K chunks (kDecodeChunkSteps) ---------------------------------------------------

// K long enough that decode runs each panel in K chunks (more than 2048 steps; not a multiple
// of the chunk), every type: the s8 column-sum correction must be added once, not per chunk,
// the fp8 scale pointers must move with the chunk, the running sums must cross chunks through
// D or the workspace, and the epilogue must run on the last chunk only. M = 16 against its rows
// one at a time (M = 1 chunks the same way) and 1 vs 2 threads, bit for bit.
TEST(GemmDecodeEdges, ChunkedDecodeLongKEveryType) {
  struct Long {
    const char* kind;
    int64_t k;
  };
  for_each_gemm_path([] {
    for (Long l : {Long{"f32", 2100}, Long{"bf16", 4200}, Long{"fp8", 4224}, Long{"bf16xfp8", 4224},
                   Long{"s8", 8400}, Long{"u8xs8", 8400}}) {
      const Operands o = make_operands(l.kind, 16, 45, l.k, uint64_t(l.k));
      const bool int8 = o.int8();
      for (int variant = 0; variant < 2; ++variant) {
        Spec s;
        s.out = std::string(l.kind) == "f32" ? DType::f32 : int8 ? DType::i32 : DType::bf16;
        s.alpha = int8 ? 1.0f : -0.5f;
        s.beta = variant == 0 ? 0.0f : int8 ? 1.0f : 0.75f;
        s.bias = variant == 1 && !int8;
        s.packed = variant == 0;
        s.pad = 3;
        set_num_threads(1);
        const Buffer one = run(o, s, true);
        // (run's C depends on the row count, so rows one at a time compare only without C)
        if (s.beta == 0.0f) {
          EXPECT_TRUE(same_bits(one, run_row_by_row(o, s))) << describe(o, s) << ": M = 16 vs its rows one at a time";
        }
        set_num_threads(2);
        const Buffer two = run(o, s, false);
        set_num_threads(0);
        EXPECT_TRUE(same_bits(one, two)) << describe(o, s) << ": 1 vs 2 threads";
      }
    }
  });
}

}  // namespace
}  // namespace sol
