// The AMX driver's blocking (ops/gemm/gemm_amx_blocked.cc): its own MC (gemm_amx_mc), a plain
// B packed one panel at a time by the first M block's tiles (later M blocks reuse the panels),
// and each panel's tiles requesting the next panel. Run on the AMX tiles where the CPU has them,
// else on the scalar tile model (AVX-512 machines), else skipped.
//
// Against the fp64 reference: several M blocks (MC forced down to 32 and 64 rows), M and N not
// multiples of 32, K with odd tails (a short last chunk of tile steps) and across two K blocks,
// nn / nt / pre-packed B, bf16, fp8 with block scales, s8 and u8 x s8, beta / bias / SiLU, bf16 D
// (partial sums in the workspace), D poisoned and nothing outside it written. Bit for bit: any
// MC, one or two threads, and a plain B (packed lazily) against the same B packed up front.
// K = 512 exactly with few rows, one tile per K block (each tile requests the next one's running
// sums and D), and a D written by non-temporal stores (forced by a low stream_min_bytes) against
// the same D written through the caches. A pre-packed B over several MC slabs of rows and two K
// blocks against the plain B's block order.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/problem.h"
#include "ops/gemm/reference.h"
#include "ops/random_bytes.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/quant.h"
#include "sol/threads.h"
#include "sol/tuning.h"

namespace sol {
namespace {

// Runs `body` on the AMX kernels: the hardware's where it has them, else the tile model.
template <class Body>
bool on_amx(Body&& body) {
  const CpuFeatures& f = cpu_features();
  if (f.best_isa >= Isa::amx) {
    body();
    return true;
  }
  if (f.best_isa < Isa::avx512) return false;
  struct Restore {
    ~Restore() { gemm_detail::force_amx_model(false); }
  } restore;
  gemm_detail::force_amx_model(true);
  body();
  return true;
}

struct OneThread {
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(0); }
};

// "bf16", "fp8" (e4m3 x e4m3 with 128-block scales), "s8", "u8xs8"; B stored [K, N] (nn) or
// [N, K] (nt).
struct Case {
  std::string kind;
  int64_t m, n, k;
  Layout layout = Layout::nt;
  bool packed = false;
  DType out = DType::f32;
  float beta = 0.0f;
  bool bias = false, silu = false;
  std::string describe() const {
    return kind + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           (layout == Layout::nn ? " nn" : " nt") + (packed ? " packed" : " plain") + " -> " + std::string(dtype_name(out)) +
           " beta=" + std::to_string(beta) + (bias ? " bias" : "") + (silu ? " silu" : "");
  }
};

struct Inputs {
  Buffer a, a_scales, b, b_scales, c, bias;
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  const bool nn = c.layout == Layout::nn;
  auto b_of = [&](DType t) { return nn ? Buffer(t, {c.k, c.n}) : Buffer(t, {c.n, c.k}); };
  if (c.kind == "bf16") {
    in.a = Buffer(DType::bf16, {c.m, c.k});
    in.b = b_of(DType::bf16);
    fill_random(in.a, 1, 1.0);
    fill_random(in.b, 2, 1.0);
  } else if (c.kind == "s8" || c.kind == "u8xs8") {
    in.a = Buffer(c.kind == "s8" ? DType::i8 : DType::u8, {c.m, c.k});
    in.b = b_of(DType::i8);
    fill_bytes(in.a, 3);
    fill_bytes(in.b, 4);
  } else {  // fp8: per-token A scales, per-128-block B scales ([N, K] only)
    Buffer af(DType::f32, {c.m, c.k}), bf(DType::f32, {c.n, c.k});
    fill_random(af, 5, 3.0);
    fill_random(bf, 6, 0.05);
    in.a = Buffer(DType::f8e4m3, {c.m, c.k});
    in.a_scales = Buffer(DType::f32, {c.m, c.k / 128});
    in.b = Buffer(DType::f8e4m3, {c.n, c.k});
    in.b_scales = Buffer(DType::f32, {(c.n + 127) / 128, c.k / 128});
    quant_fp8_per_token(af, in.a, in.a_scales);
    quant_fp8_per_block(bf, in.b, in.b_scales);
  }
  const bool int8 = c.kind == "s8" || c.kind == "u8xs8";
  in.c = Buffer(c.out, {c.m, c.n});
  fill_random(in.c, 7, int8 ? 1e6 : 1.0);
  in.bias = Buffer(DType::f32, {c.n});
  fill_random(in.bias, 8, 1.0);
  return in;
}

// The case's epilogue options (layout, beta with C, bias, activation), reading in's tensors.
GemmOptions options_of(const Case& c, const Inputs& in) {
  GemmOptions o;
  o.layout = c.layout;
  o.beta = c.beta;
  o.c = c.beta != 0.0f ? &in.c.tensor() : nullptr;
  o.bias = c.bias ? &in.bias.tensor() : nullptr;
  o.activation = c.silu ? Activation::silu : Activation::none;
  return o;
}

// D has a poisoned row above and below and 3 poisoned columns to the right.
Buffer run(const Case& c, const Inputs& in) {
  const int64_t ld = c.n + 3;
  Buffer d_buf(c.out, {c.m + 2, ld});
  std::memset(d_buf.data(), 0xFF, d_buf.bytes());
  const Tensor d = d_buf.tensor().slice(0, 1, c.m + 1).slice(1, 0, c.n);
  const Tensor a_scales = c.kind == "fp8" ? in.a_scales.tensor() : Tensor();
  GemmOptions o = options_of(c, in);
  o.a_scales = c.kind == "fp8" ? &a_scales : nullptr;
  const Tensor* b_scales = c.kind == "fp8" ? &in.b_scales.tensor() : nullptr;
  if (c.packed) {
    gemm(in.a, pack_b(in.b, c.layout, b_scales), d, o);
  } else {
    o.b_scales = b_scales;
    gemm(in.a, in.b, d, o);
  }
  const size_t es = dtype_size(c.out);
  const auto* bytes = static_cast<const unsigned char*>(d_buf.data());
  int64_t outside = 0;
  for (int64_t i = 0; i < c.m + 2; ++i)
    for (int64_t j = 0; j < ld; ++j)
      if (i == 0 || i == c.m + 1 || j >= c.n)
        for (size_t byte = 0; byte < es; ++byte) outside += bytes[(i * ld + j) * int64_t(es) + int64_t(byte)] != 0xFF;
  EXPECT_EQ(outside, 0) << c.describe() << ": wrote outside D";
  Buffer out(c.out, {c.m, c.n});
  for (int64_t i = 0; i < c.m; ++i)
    std::memcpy(static_cast<char*>(out.data()) + size_t(i * c.n) * es, bytes + size_t((i + 1) * ld) * es,
                size_t(c.n) * es);
  return out;
}

void check_against_reference(const Case& c, const Inputs& in, const Buffer& out) {
  const bool int8 = c.kind == "s8" || c.kind == "u8xs8";
  Buffer ref(int8 ? DType::i32 : DType::f32, {c.m, c.n});
  const Tensor a_scales = c.kind == "fp8" ? in.a_scales.tensor() : Tensor();
  reference_gemm(in.a, in.b, c.layout, c.beta != 0.0f ? &in.c.tensor() : nullptr, 1.0f, c.beta,
                 c.bias ? &in.bias.tensor() : nullptr, c.silu ? Activation::silu : Activation::none, ref,
                 c.kind == "fp8" ? &a_scales : nullptr, c.kind == "fp8" ? &in.b_scales.tensor() : nullptr);
  if (int8) {
    const CheckResult r = compare_bitwise(out, ref);
    EXPECT_TRUE(r.pass) << c.describe() << ": " << r.detail;
  } else {
    const CheckResult r = compare_relative(out, ref, c.out == DType::bf16 ? 1e-2 : 2e-5);
    EXPECT_TRUE(r.pass) << c.describe() << ": " << r.detail;
  }
}

TuningParams with_amx_mc(int64_t mc) {
  TuningParams p = tuning().params;
  p.gemm_amx_mc = mc;
  return p;
}

// The driver's loops at small MC: each case against the reference at MC = 32 and 64 (one to
// four M blocks, the first packing B's panels and the rest reusing them), and bit for bit
// against the default MC.
TEST(GemmAmxBlocking, SeveralMBlocksMatchTheReferenceAndEachOther) {
  OneThread one_thread;
  std::vector<Case> cases;
  for (int64_t m : {17, 33, 100})
    for (int64_t n : {1, 31, 33, 100})
      for (int64_t k : {1, 31, 66, 301}) cases.push_back({"bf16", m, n, k});
  cases.push_back({"bf16", 70, 65, 300, Layout::nn});
  cases.push_back({"bf16", 70, 65, 300, Layout::nn, true});
  cases.push_back({"bf16", 70, 65, 300, Layout::nt, true});
  cases.push_back({"bf16", 70, 65, 300, Layout::nt, false, DType::bf16, 0.5f, true, true});
  cases.push_back({"bf16", 70, 65, 300, Layout::nn, false, DType::f32, -1.5f, true, false});
  cases.push_back({"s8", 70, 65, 301});
  cases.push_back({"u8xs8", 70, 65, 260, Layout::nn});
  cases.push_back({"s8", 70, 65, 260, Layout::nt, true, DType::i32, 1.0f});
  cases.push_back({"fp8", 70, 65, 256});
  cases.push_back({"fp8", 40, 33, 384, Layout::nt, true, DType::bf16, 0.0f, true, false});
  for (Case& c : cases)
    if ((c.kind == "s8" || c.kind == "u8xs8") && c.out == DType::f32) c.out = DType::i32;
  const bool ran = on_amx([&] {
    for (const Case& c : cases) {
      // Small MC first: a workspace left by a one-block run of the same B must not hide a panel
      // that the first M block failed to pack.
      const Inputs in = make_inputs(c);
      std::vector<Buffer> outs;
      for (int64_t mc : {32, 64}) {
        const ScopedTuning forced(with_amx_mc(mc));
        outs.push_back(run(c, in));
        check_against_reference(c, in, outs.back());
      }
      const Buffer by_default = run(c, in);
      for (const Buffer& out : outs) EXPECT_TRUE(compare_bitwise(out, by_default).pass) << c.describe() << ": MC changed bits";
    }
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

// K past one K block (2048 bf16): the running sums wait in the workspace (bf16 D) or in D
// between blocks, while the panels of the second block are packed as lazily as the first's.
TEST(GemmAmxBlocking, TwoKBlocksMatchTheReference) {
  OneThread one_thread;
  const bool ran = on_amx([] {
    for (DType out : {DType::f32, DType::bf16}) {
      const Case c{"bf16", 40, 70, 2100, Layout::nt, false, out, 0.25f, true, false};
      const Inputs in = make_inputs(c);
      const ScopedTuning forced(with_amx_mc(32));
      check_against_reference(c, in, run(c, in));
    }
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

// A pre-packed B with more rows than MC runs one MC slab of rows at a time (gemm_amx_blocked.cc,
// run_rows); a plain B runs all rows block by block. Across two K blocks, whose running sums wait
// in the workspace (bf16 D) or in D (f32, i32), both match the reference and each other bit for
// bit, at one and two threads.
TEST(GemmAmxBlocking, PrepackedSlabsAcrossKBlocksKeepTheBits) {
  std::vector<Case> cases;
  for (DType out : {DType::f32, DType::bf16}) cases.push_back({"bf16", 100, 70, 2100, Layout::nt, false, out, 0.25f, true, false});
  cases.push_back({"bf16", 97, 40, 2200, Layout::nn, false, DType::bf16});
  cases.push_back({"s8", 70, 33, 4200, Layout::nt, false, DType::i32, 1.0f});
  const bool ran = on_amx([&] {
    for (const Case& c : cases) {
      const Inputs in = make_inputs(c);
      const ScopedTuning forced(with_amx_mc(32));
      set_num_threads(1);
      const Buffer plain = run(c, in);
      check_against_reference(c, in, plain);
      Case packed = c;
      packed.packed = true;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Buffer slabs = run(packed, in);
        check_against_reference(packed, in, slabs);
        EXPECT_TRUE(compare_bitwise(slabs, plain).pass) << packed.describe() << " threads " << threads;
      }
    }
    set_num_threads(0);
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

// The same bits from a plain B packed panel by panel, the same B packed up front, one thread
// or two, and any MC.
TEST(GemmAmxBlocking, BitsDoNotDependOnPackingMcOrThreads) {
  const bool ran = on_amx([] {
    for (const char* kind : {"bf16", "s8"}) {
      Case c{kind, 130, 200, 333};
      if (c.kind == "s8") c.out = DType::i32;
      const Inputs in = make_inputs(c);
      set_num_threads(1);
      const Buffer base = run(c, in);
      for (int threads : {1, 2})
        for (int64_t mc : {32, 96, 3072})
          for (bool packed : {false, true}) {
            set_num_threads(threads);
            const ScopedTuning forced(with_amx_mc(mc));
            Case v = c;
            v.packed = packed;
            EXPECT_TRUE(compare_bitwise(run(v, in), base).pass)
                << v.describe() << " threads " << threads << " MC " << mc;
          }
      set_num_threads(0);
    }
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

// Shapes where one tile is all a K block has (the tile after it, whose running sums it requests,
// is in the next K block's pass): 17 or 32 rows, 1 or 32 columns, K over two and three K blocks,
// partial sums in D (f32) and in the workspace (bf16 D); and K = 512 (16 chunks a tile, the
// shapes whose tiles end most often) with few rows, M, N and K off the multiples of 16 and 32.
TEST(GemmAmxBlocking, OneTilePerKBlockAndKOf512MatchTheReference) {
  OneThread one_thread;
  std::vector<Case> cases;
  for (int64_t m : {17, 32})
    for (int64_t n : {1, 32}) {
      cases.push_back({"bf16", m, n, 4100, Layout::nt, false, DType::f32});
      cases.push_back({"bf16", m, n, 4100, Layout::nt, true, DType::bf16, 0.5f, true, false});
    }
  cases.push_back({"bf16", 20, 30, 6200, Layout::nn, false, DType::bf16});
  cases.push_back({"s8", 32, 32, 8200, Layout::nt, false, DType::i32, 1.0f});
  cases.push_back({"fp8", 17, 32, 4096, Layout::nt, true, DType::bf16});
  for (int64_t m : {17, 31, 45, 77, 128})
    for (int64_t n : {31, 33, 96})
      for (int64_t k : {512, 510, 542}) cases.push_back({"bf16", m, n, k, Layout::nt, true, DType::bf16});
  cases.push_back({"bf16", 77, 33, 512, Layout::nn, false, DType::f32, 0.0f, true, true});
  cases.push_back({"s8", 45, 96, 512, Layout::nt, true, DType::i32});
  const bool ran = on_amx([&] {
    for (const Case& c : cases) {
      const Inputs in = make_inputs(c);
      check_against_reference(c, in, run(c, in));
    }
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

// D as its own dense tensor (rows whole lines where N is a multiple of 32), so the tiles may
// stream it.
Buffer run_dense(const Case& c, const Inputs& in) {
  Buffer d(c.out, {c.m, c.n});
  std::memset(d.data(), 0xFF, d.bytes());
  GemmOptions o = options_of(c, in);
  if (c.packed) gemm(in.a, pack_b(in.b, c.layout), d, o);
  else gemm(in.a, in.b, d, o);
  return d;
}

// Non-temporal stores of D (stream_min_bytes forced down to its 64 KiB minimum; every D here is
// at least that) give the bytes the cached stores give, on tiles that stream (whole aligned
// lines) and beside ones that cannot (a last panel of 8 or 16 columns, rows not starting on a
// line), with every epilogue term, after two K blocks (running sums in D or the workspace), one
// and two threads.
TEST(GemmAmxBlocking, StreamedDKeepsTheBits) {
  std::vector<Case> cases;
  for (DType out : {DType::bf16, DType::f32}) {
    cases.push_back({"bf16", 128, 512, 512, Layout::nt, true, out});
    cases.push_back({"bf16", 100, 520, 300, Layout::nn, false, out, 0.5f, true, true});
    cases.push_back({"bf16", 33, 1040, 64, Layout::nt, false, out, -1.0f, false, false});
    cases.push_back({"bf16", 70, 512, 2100, Layout::nt, true, out, 0.0f, true, false});
  }
  cases.push_back({"s8", 96, 512, 256, Layout::nt, true, DType::i32});
  cases.push_back({"s8", 20, 1024, 4200, Layout::nt, false, DType::i32, 1.0f});
  cases.push_back({"u8xs8", 70, 1024, 130, Layout::nt, false, DType::i32});
  const bool ran = on_amx([&] {
    for (const Case& c : cases) {
      const Inputs in = make_inputs(c);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Buffer cached = run_dense(c, in);
        TuningParams low = tuning().params;
        low.stream_min_bytes = 64 << 10;
        const ScopedTuning forced(low);
        const Buffer streamed = run_dense(c, in);
        EXPECT_TRUE(compare_bitwise(streamed, cached).pass) << c.describe() << " threads " << threads;
        check_against_reference(c, in, streamed);
      }
      set_num_threads(0);
    }
  });
  if (!ran) GTEST_SKIP() << "no AMX and no AVX-512 for the tile model";
}

}  // namespace
}  // namespace sol
