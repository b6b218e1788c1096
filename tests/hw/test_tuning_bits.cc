// Tuning changes speed only: every op that promises bits gives the same bytes under every forced
// tuning (each `sol tune` candidate, the extremes of each parameter's range, mixtures) and any
// thread count, as under the defaults on one thread.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env_guard.h"
#include "ops/common/fill.h"
#include "ops/tune/tune_cases.h"
#include "sol/sol.h"

namespace sol {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr int64_t kRows = 150, kHidden = 7168;  // the row ops' shape
// The GEMM cases' D: rows of whole 64-byte lines (608 columns), so the AMX tiles can stream D.
constexpr int64_t kGemmM = 100, kGemmN = 608;

// One op call on fixed inputs; returns its outputs' bytes (poisoned with 0xFF before the call).
struct BitCase {
  std::string name;
  std::function<Bytes()> run;
};

struct Inputs {
  std::vector<Buffer> keep;
  Tensor add(DType t, std::initializer_list<int64_t> shape, uint64_t seed, double scale = 2.0) {
    keep.emplace_back(t, shape);
    if (seed) fill_random(keep.back(), seed, scale);
    return keep.back();
  }
};

Bytes take(std::initializer_list<Tensor> outs) {
  Bytes b;
  for (const Tensor& t : outs) {
    const auto* p = static_cast<const uint8_t*>(t.data());
    b.insert(b.end(), p, p + t.nbytes());
  }
  return b;
}

void poison(std::initializer_list<Tensor> outs) {
  for (const Tensor& t : outs) std::memset(t.data(), 0xFF, size_t(t.nbytes()));
}

std::vector<BitCase> bit_cases(Inputs& in) {
  std::vector<BitCase> cases;
  // GEMM: several M and N blocks at the smallest blocking, one at the largest; two K blocks
  // (KC is a constant: ops/gemm/blocking.h); plain and packed B; partial sums in D (f32) and
  // in the workspace (bf16 D, C = D); D streamed at the smallest threshold, cached at the largest.
  for (DType t : {DType::f32, DType::bf16, DType::i8, DType::f8e4m3}) {
    const int64_t m = kGemmM, n = kGemmN, k = 4608;
    const bool s8 = t == DType::i8, f8 = t == DType::f8e4m3;
    const Tensor a = in.add(t, {m, k}, 11), b = in.add(t, {k, n}, 12);
    const Tensor d = in.add(s8 ? DType::i32 : f8 ? DType::bf16 : DType::f32, {m, n}, 0);
    const Tensor as = in.add(DType::f32, {m, k / 128}, 13, 1.0), bs = in.add(DType::f32, {(n + 127) / 128, k / 128}, 14, 1.0);
    cases.push_back({"gemm " + std::string(dtype_name(t)), [=] {
                       GemmOptions o;
                       if (f8) o.a_scales = &as, o.b_scales = &bs;
                       poison({d});
                       gemm(a, b, d, o);
                       return take({d});
                     }});
    if (!f8) {
      auto packed = std::make_shared<PackedMatrix>(pack_b(b, Layout::nn));
      cases.push_back({"gemm packed " + std::string(dtype_name(t)), [=] {
                         poison({d});
                         gemm(a, *packed, d);
                         return take({d});
                       }});
    }
  }
  {  // bf16 D from a packed B (partials in the workspace): the drivers run packed rows one MC
     // block at a time where MC is under M, and all at once where it is not
    const Tensor a = in.add(DType::bf16, {kGemmM, 4608}, 37), b = in.add(DType::bf16, {4608, kGemmN}, 38);
    const Tensor d = in.add(DType::bf16, {kGemmM, kGemmN}, 0);
    auto packed = std::make_shared<PackedMatrix>(pack_b(b, Layout::nn));
    cases.push_back({"gemm packed bf16 -> bf16", [=] {
                       poison({d});
                       gemm(a, *packed, d);
                       return take({d});
                     }});
  }
  {  // bf16 D, C = D (partials in the workspace), with bias and silu
    const Tensor a = in.add(DType::bf16, {40, 3000}, 15), b = in.add(DType::bf16, {300, 3000}, 16);
    const Tensor c = in.add(DType::bf16, {40, 300}, 17), d = in.add(DType::bf16, {40, 300}, 0);
    const Tensor bias = in.add(DType::f32, {300}, 18);
    cases.push_back({"gemm bf16 nt, C = D, bias, silu", [=] {
                       std::memcpy(d.data(), c.data(), size_t(d.nbytes()));
                       GemmOptions o;
                       o.layout = Layout::nt;
                       o.beta = 0.5f;
                       o.bias = &bias;
                       o.activation = Activation::silu;
                       gemm(a, b, d, o);
                       return take({d});
                     }});
  }
  // Decode: K long enough to run in chunks (bf16 4224 steps).
  for (DType t : {DType::bf16, DType::f8e4m3, DType::i8}) {
    const int64_t k = 8448, n = 200;
    const Tensor x = in.add(t, {5, k}, 19), w = in.add(t, {n, k}, 20);
    const Tensor ws = in.add(DType::f32, {(n + 127) / 128, k / 128}, 21, 1.0);
    const Tensor xs = in.add(DType::f32, {5, k / 128}, 22, 1.0);
    const Tensor y = in.add(t == DType::i8 ? DType::i32 : DType::f32, {5, n}, 0);
    auto packed = std::make_shared<PackedMatrix>(pack_b(w, Layout::nt, t == DType::f8e4m3 ? &ws : nullptr));
    cases.push_back({"gemm decode packed " + std::string(dtype_name(t)), [=] {
                       poison({y});
                       GemmOptions o;
                       if (t == DType::f8e4m3) o.a_scales = &xs;
                       gemm(x, *packed, y, o);
                       return take({y});
                     }});
  }
  {  // decode with a plain B
    const Tensor x = in.add(DType::bf16, {3, 8448}, 23), w = in.add(DType::bf16, {8448, 100}, 24);
    const Tensor y = in.add(DType::f32, {3, 100}, 0);
    cases.push_back({"gemm decode plain bf16", [=] {
                       poison({y});
                       gemm(x, w, y);
                       return take({y});
                     }});
  }
  // Row ops whose stores stream from stream_min_bytes on: 2.1 MiB of bf16 output, streamed at
  // the smallest `sol tune` candidate (512 KiB) and at the range's minimum, not at the maximum.
  const int64_t rows = kRows, h = kHidden;
  const Tensor xb = in.add(DType::bf16, {rows, h}, 25), wb = in.add(DType::bf16, {h}, 26);
  const Tensor yb = in.add(DType::bf16, {rows, h}, 0), yf = in.add(DType::f32, {rows, h}, 0);
  const Tensor q = in.add(DType::f8e4m3, {rows, h}, 0), qs = in.add(DType::f32, {rows, h / 128}, 0);
  cases.push_back({"rmsnorm bf16", [=] {
                     poison({yb});
                     rmsnorm(xb, wb, yb);
                     return take({yb});
                   }});
  cases.push_back({"rmsnorm + fp8 quant", [=] {
                     poison({q, qs});
                     rmsnorm_quant_fp8(xb, wb, q, qs);
                     return take({q, qs});
                   }});
  cases.push_back({"quant fp8 per token", [=] {
                     poison({q, qs});
                     quant_fp8_per_token(xb, q, qs);
                     return take({q, qs});
                   }});
  const Tensor gu = in.add(DType::bf16, {rows, 2 * h}, 27);
  cases.push_back({"silu_mul", [=] {
                     poison({yb});
                     silu_mul(gu, yb);
                     return take({yb});
                   }});
  cases.push_back({"softmax bf16", [=] {
                     poison({yb});
                     softmax(xb, yb);
                     return take({yb});
                   }});
  const Tensor xf = in.add(DType::f32, {rows, h}, 28);
  cases.push_back({"softmax f32", [=] {
                     poison({yf});
                     softmax(xf, yf);
                     return take({yf});
                   }});
  cases.push_back({"cast bf16 -> f32", [=] {
                     poison({yf});
                     cast(xb, yf);
                     return take({yf});
                   }});
  // A cast whose output streams whatever the threshold, so every pass_prefetch_bytes candidate
  // runs its look-ahead (odd length: a masked tail after the streamed blocks).
  const Tensor xf8 = in.add(DType::f32, {rows * h - 37}, 36), q8 = in.add(DType::f8e4m3, {rows * h - 37}, 0);
  cases.push_back({"cast f32 -> f8e4m3, streamed", [=] {
                     TuningParams p = tuning().params;
                     p.stream_min_bytes = 64L << 10;
                     const ScopedTuning streamed(p);
                     poison({q8});
                     cast(xf8, q8);
                     return take({q8});
                   }});
  // The row kernels' look-ahead (row_prefetch_bytes, pass_*, rope_prefetch_heads) and the
  // fused quantizer's pipeline depth, on every op family whose kernels take them.
  const Tensor bias_b = in.add(DType::bf16, {h}, 31), res0 = in.add(DType::bf16, {rows, h}, 32);
  const Tensor res = in.add(DType::bf16, {rows, h}, 0);
  cases.push_back({"add_rmsnorm bf16", [=] {
                     std::memcpy(res.data(), res0.data(), size_t(res.nbytes()));
                     poison({yb});
                     add_rmsnorm(xb, res, wb, yb);
                     return take({yb, res});
                   }});
  cases.push_back({"layernorm bf16 + bias", [=] {
                     poison({yb});
                     layernorm(xb, wb, &bias_b, yb);
                     return take({yb});
                   }});
  cases.push_back({"rmsnorm and layernorm f32", [=] {
                     poison({yf});
                     rmsnorm(xf, wb, yf);
                     Bytes b = take({yf});
                     poison({yf});
                     layernorm(xf, wb, nullptr, yf);
                     const Bytes l = take({yf});
                     b.insert(b.end(), l.begin(), l.end());
                     return b;
                   }});
  cases.push_back({"gelu bf16", [=] {
                     poison({yb});
                     gelu(xb, yb);
                     return take({yb});
                   }});
  cases.push_back({"silu_mul + fp8 quant", [=] {
                     poison({q, qs});
                     silu_mul_quant_fp8(gu, q, qs);
                     return take({q, qs});
                   }});
  {  // DeepSeek-V3's MLA rope slice (64 of 192 per head), in place from the same input each run
    const Tensor heads0 = in.add(DType::bf16, {40, 128, 192}, 33), heads = in.add(DType::bf16, {40, 128, 192}, 0);
    const Tensor pos = in.add(DType::i32, {40}, 0);
    for (int t = 0; t < 40; ++t) pos.data_as<int32_t>()[t] = t * 97;
    auto table = std::make_shared<RopeTable>(deepseek_v3_rope(), 4096);
    cases.push_back({"rope bf16 (MLA slice)", [=] {
                       std::memcpy(heads.data(), heads0.data(), size_t(heads.nbytes()));
                       rope(heads, pos, *table, 128);
                       return take({heads});
                     }});
  }
  {  // MoE combine: 8 rows per token gathered and summed
    constexpr int64_t tokens = 40, k = 8;
    const Tensor y_perm = in.add(DType::bf16, {tokens * k, h}, 34), row_of = in.add(DType::i32, {tokens, k}, 0);
    const Tensor tw = in.add(DType::f32, {tokens, k}, 35, 1.0), comb = in.add(DType::bf16, {tokens, h}, 0);
    for (int64_t i = 0; i < tokens * k; ++i) row_of.data_as<int32_t>()[i] = int32_t(i * 37 % (tokens * k));
    cases.push_back({"moe_unpermute bf16", [=] {
                       poison({comb});
                       moe_unpermute(y_perm, row_of, tw, comb);
                       return take({comb});
                     }});
  }
  const Tensor logits = in.add(DType::f32, {rows, 256}, 29), bias = in.add(DType::f32, {256}, 30, 0.1);
  const Tensor idx = in.add(DType::i32, {rows, 8}, 0), wts = in.add(DType::f32, {rows, 8}, 0);
  cases.push_back({"moe routing (DeepSeek-V3)", [=] {
                     poison({idx, wts});
                     RoutingOptions o = deepseek_v3_routing(&bias);
                     moe_routing(logits, idx, wts, o);
                     return take({idx, wts});
                   }});
  return cases;
}

// Every forced tuning: each parameter's `sol tune` candidates over the defaults, then the
// extremes of every range and two mixtures of them (the worst any cache could hold).
std::vector<std::pair<std::string, TuningParams>> forced_tunings() {
  const TuningParams def = default_tuning_params(core_shape());
  std::vector<std::pair<std::string, TuningParams>> out;
  TuningParams lo = def, hi = def, mix1 = def, mix2 = def;
  bool odd = false;
  for (const TuningParamInfo& i : tuning_param_infos()) {
    for (int64_t v : tune_candidates(i.name)) {
      TuningParams p = def;
      p.*i.field = v;
      out.push_back({std::string(i.name) + "=" + std::to_string(v), p});
    }
    lo.*i.field = i.min;
    hi.*i.field = i.max / i.multiple * i.multiple;
    TuningParams* to_min = odd ? &mix1 : &mix2;
    TuningParams* to_max = odd ? &mix2 : &mix1;
    to_min->*i.field = i.min;
    to_max->*i.field = i.max / i.multiple * i.multiple;
    odd = !odd;
  }
  out.push_back({"all minima", lo});
  out.push_back({"all maxima", hi});
  out.push_back({"mixed minima/maxima", mix1});
  out.push_back({"mixed maxima/minima", mix2});
  return out;
}

class TuningBits : public ::testing::TestWithParam<const char*> {};

TEST_P(TuningBits, EveryForcedTuningGivesTheDefaultBits) {
  // A level above the CPU's would be clamped to a lower one: that path has its own instance.
  if (parse_isa(GetParam()) > cpu_features().best_isa) GTEST_SKIP() << "this CPU lacks " << GetParam();
  testing::EnvGuard isa("SOL_ISA", GetParam());
  Inputs in;
  const std::vector<BitCase> cases = bit_cases(in);
  std::vector<Bytes> expected;
  {
    ScopedTuning defaults(default_tuning_params(core_shape()));
    set_num_threads(1);
    for (const BitCase& c : cases) expected.push_back(c.run());
  }
  for (const auto& [label, params] : forced_tunings()) {
    ScopedTuning forced(params);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (size_t i = 0; i < cases.size(); ++i)
        EXPECT_TRUE(cases[i].run() == expected[i])
            << cases[i].name << " under " << label << " on " << threads << " threads, SOL_ISA=" << GetParam();
    }
  }
  set_num_threads(0);
}

// The levels whose row kernels read the tuning (each skipped where the CPU lacks it). avx2 runs
// the plain row loops, several minutes of this sweep on a 2-CPU guest.
INSTANTIATE_TEST_SUITE_P(Isa, TuningBits, ::testing::Values("avx512", "amx"));

// The sweep itself must reach what it claims: the smallest blocking splits the GEMM cases into
// several blocks, the largest does not; the smallest thresholds stream and pipeline the row
// ops, the largest do not; the mixtures are mixtures (a mixture once silently stayed at the
// defaults: GCC 12 assigns through `(c ? a : b).*member` to a copy).
TEST(TuningBits, ExtremesCoverTheBlockingAndStreamingPaths) {
  const auto forced = forced_tunings();
  const TuningParams& lo = forced[forced.size() - 4].second;
  const TuningParams& hi = forced[forced.size() - 3].second;
  EXPECT_LT(lo.gemm_mc, kGemmM);  // several M blocks
  EXPECT_GE(hi.gemm_mc, kGemmM);  // ... and one
  EXPECT_LT(lo.gemm_nc, kGemmN);  // several N blocks
  EXPECT_GE(hi.gemm_nc, kGemmN);  // ... and one
  EXPECT_LE(lo.stream_min_bytes, kGemmM * kGemmN * 2);  // every GEMM D streams (bf16 the least)
  EXPECT_GT(hi.stream_min_bytes, kGemmM * kGemmN * 4);  // ... and none does
  const int64_t bf16_out = kRows * kHidden * 2;
  EXPECT_LE(lo.stream_min_bytes, bf16_out);  // the bf16 outputs stream
  EXPECT_LE(tune_candidates("stream_min_bytes").front(), bf16_out);  // also at a tuned value
  EXPECT_GT(hi.stream_min_bytes, 2 * bf16_out);  // ... and do not
  EXPECT_LE(lo.softmax_pipeline_min_rows, kRows / 2);  // two threads' rows pipeline
  EXPECT_GT(hi.softmax_pipeline_min_rows, kRows);      // ... and do not
  EXPECT_EQ(lo.row_prefetch_bytes, 0);                 // look-ahead of none
  EXPECT_GT(hi.row_prefetch_bytes, kHidden * 2);       // ... and past a whole bf16 row
  EXPECT_EQ(lo.pass_prefetch_bytes, 0);
  EXPECT_GT(hi.pass_prefetch_bytes, kHidden * 2);
  EXPECT_GT(hi.pass_l2_prefetch_bytes, kHidden * 2);
  EXPECT_LT(lo.rope_prefetch_heads, 128);              // 128 heads: within the token
  EXPECT_GT(hi.rope_prefetch_heads, 2 * 128);          // ... and past the next token's
  EXPECT_EQ(lo.rope_pair_tokens, 0);                   // one token per call
  EXPECT_EQ(hi.rope_pair_tokens, 1);                   // ... and two
  EXPECT_EQ(lo.rope_l2_prefetch_heads, 0);             // no L2 look-ahead
  EXPECT_GT(hi.rope_l2_prefetch_heads, 2 * 128);       // ... and one past the next token's
  EXPECT_EQ(lo.quant_pipeline_groups, 1);              // every depth the kernel compiles:
  EXPECT_EQ(hi.quant_pipeline_groups, 4);              // the ends here, 2 and 3 as candidates
  const TuningParams& mix1 = forced[forced.size() - 2].second;
  const TuningParams& mix2 = forced.back().second;
  EXPECT_NE(mix1, lo);
  EXPECT_NE(mix1, hi);
  for (const TuningParamInfo& i : tuning_param_infos()) {  // each field at one end in one, the other in the other
    EXPECT_TRUE((mix1.*i.field == lo.*i.field && mix2.*i.field == hi.*i.field) ||
                (mix1.*i.field == hi.*i.field && mix2.*i.field == lo.*i.field))
        << i.name;
    EXPECT_LT(lo.*i.field, hi.*i.field) << i.name;
  }
}

}  // namespace
}  // namespace sol
