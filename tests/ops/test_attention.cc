// Flash attention forward against the fp64 reference on every ISA path: odd lengths, GQA/MQA,
// causal (bottom-right, with empty rows), sliding windows, varlen with empty sequences, strided
// inputs, NaN propagation, determinism and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/attention/reference.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/error_message.h"
#include "ops/attention_shape.h"
#include "ops/isa_paths.h"
#include "sol/attention.h"
#include "sol/error.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_bf16_path;

using testing_attention::Shape;

double tolerance(DType t) { return t == DType::bf16 ? 1e-2 : 2e-5; }

struct Inputs {
  Buffer q, k, v, o, lse;
  Inputs(const Shape& s, DType t, uint64_t seed)
      : q(t, {s.b, s.sq, s.hq, s.dqk}), k(t, {s.b, s.skv, s.hkv, s.dqk}), v(t, {s.b, s.skv, s.hkv, s.dv}),
        o(t, {s.b, s.sq, s.hq, s.dv}), lse(DType::f32, {s.b, s.hq, s.sq}) {
    fill_random(q, seed + 1, 2.0);  // scores spread over a few units: a peaked, non-uniform softmax
    fill_random(k, seed + 2, 1.5);
    fill_random(v, seed + 3, 1.0);
  }
};

// Runs the op (outputs poisoned) and compares o and lse with the reference.
void expect_matches_reference(const Shape& s, DType t, const AttentionOptions& opt, uint64_t seed = 7) {
  SCOPED_TRACE(s.describe() + " " + std::string(dtype_name(t)));
  Inputs in(s, t, seed);
  poison(in.o);
  poison(in.lse);
  flash_attention(in.q, in.k, in.v, in.o, in.lse, opt);
  Buffer ro(DType::f32, {s.b, s.sq, s.hq, s.dv}), rl(DType::f32, {s.b, s.hq, s.sq});
  reference::attention_forward({&in.q.tensor(), &in.k.tensor(), &in.v.tensor(), opt}, ro, rl);
  CheckResult r = compare_relative(in.o, ro, tolerance(t));
  EXPECT_TRUE(r.pass) << "o: error " << r.error << " " << r.detail;
  CheckResult rlse = compare_relative(in.lse, rl, tolerance(t));
  EXPECT_TRUE(rlse.pass) << "lse: error " << rlse.error << " " << rlse.detail;
}

TEST(Attention, MatchesReferenceOddShapes) {
  const Shape shapes[] = {
      {1, 1, 1, 1, 1, 64, 64},
      {2, 17, 17, 2, 2, 64, 64},
      {1, 1, 1000, 4, 1, 128, 128},             // decode row, MQA
      {1, 33, 95, 8, 2, 192, 128, true},        // GQA, MLA-prefill dims, Sq < Skv causal
      {1, 40, 17, 2, 2, 128, 128, true},        // Sq > Skv causal: rows 0..22 see nothing
      {1, 70, 70, 2, 1, 256, 256, false, 20, 5},
      {1, 90, 61, 3, 3, 64, 128, true, 33, -1},  // causal sliding window
      {1, 29, 29, 1, 1, 8, 16, false, 0, 0},    // each query sees its own key only
      {1, 5, 20, 1, 1, 64, 64, false, 3, -1},   // window ending before the keys do
  };
  for_each_bf16_path([&] {
    for (const Shape& s : shapes)
      for (DType t : {DType::f32, DType::bf16}) expect_matches_reference(s, t, s.options());
  });
}

TEST(Attention, LongCausalSequence) {
  const Shape s{1, 1000, 1000, 2, 1, 64, 64, true};
  for_each_bf16_path([&] { expect_matches_reference(s, DType::bf16, s.options()); });
  expect_matches_reference(s, DType::f32, s.options());
}

TEST(Attention, CustomScale) {
  Shape s{1, 50, 77, 2, 2, 64, 64};
  AttentionOptions opt = s.options();
  opt.softmax_scale = 0.37f;
  expect_matches_reference(s, DType::f32, opt);
}

TEST(Attention, EmptyRowsGiveZeroAndMinusInfinity) {
  const Shape s{1, 40, 17, 2, 1, 64, 64, true};
  for_each_bf16_path([&] {
    Inputs in(s, DType::bf16, 3);
    poison(in.o);
    poison(in.lse);
    flash_attention(in.q, in.k, in.v, in.o, in.lse, s.options());
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 40; ++i) {
        const float l = *static_cast<const float*>(in.lse.tensor().ptr({0, h, i}));
        if (i < 23) {
          EXPECT_TRUE(std::isinf(l) && l < 0) << "row " << i;
          for (int64_t d = 0; d < 64; ++d)
            EXPECT_EQ(*static_cast<const uint16_t*>(in.o.tensor().ptr({0, i, h, d})), 0) << "row " << i;
        } else {
          EXPECT_TRUE(std::isfinite(l)) << "row " << i;
        }
      }
  });
}

TEST(Attention, VarlenWithEmptySequences) {
  // Sequences (sq, skv): (5, 7), (0, 0), (33, 40), (0, 3), (1, 0) -> the last row sees nothing.
  const std::vector<int32_t> cq = {0, 5, 5, 38, 38, 39}, ck = {0, 7, 7, 47, 50, 50};
  const int64_t tq = 39, tk = 50, hq = 4, hkv = 2, d = 64;
  for (bool causal : {false, true})
    for (DType t : {DType::f32, DType::bf16})
      for_each_bf16_path([&] {
        SCOPED_TRACE(std::string(dtype_name(t)) + (causal ? " causal" : ""));
        Buffer cu_q(DType::i32, {6}), cu_k(DType::i32, {6});
        std::copy(cq.begin(), cq.end(), cu_q.tensor().data_as<int32_t>());
        std::copy(ck.begin(), ck.end(), cu_k.tensor().data_as<int32_t>());
        Buffer q(t, {tq, hq, d}), k(t, {tk, hkv, d}), v(t, {tk, hkv, d}), o(t, {tq, hq, d}), lse(DType::f32, {hq, tq});
        fill_random(q, 11, 2.0);
        fill_random(k, 12, 1.5);
        fill_random(v, 13, 1.0);
        poison(o);
        poison(lse);
        AttentionOptions opt;
        opt.causal = causal;
        opt.cu_seqlens_q = &cu_q.tensor();
        opt.cu_seqlens_k = &cu_k.tensor();
        flash_attention(q, k, v, o, lse, opt);
        Buffer ro(DType::f32, {tq, hq, d}), rl(DType::f32, {hq, tq});
        reference::attention_forward({&q.tensor(), &k.tensor(), &v.tensor(), opt}, ro, rl);
        CheckResult r = compare_relative(o, ro, tolerance(t));
        EXPECT_TRUE(r.pass) << r.error << " " << r.detail;
        CheckResult rlse = compare_relative(lse, rl, tolerance(t));
        EXPECT_TRUE(rlse.pass) << rlse.error << " " << rlse.detail;
        EXPECT_TRUE(std::isinf(*static_cast<const float*>(lse.tensor().ptr({0, 38}))));
      });
}

TEST(Attention, StridedInputsFromAFusedQkvBuffer) {
  // q, k, v as head slices of one [B, S, Hq + 2 Hkv, D] projection output; o padded per token.
  const int64_t b = 2, s = 45, hq = 4, hkv = 2, d = 64;
  for (DType t : {DType::f32, DType::bf16})
    for_each_bf16_path([&] {
      Buffer qkv(t, {b, s, hq + 2 * hkv, d}), opad(t, {b, s, hq + 1, d}), lse(DType::f32, {b, hq, s});
      fill_random(qkv, 21, 1.5);
      poison(opad);
      const Tensor q = qkv.tensor().slice(2, 0, hq), k = qkv.tensor().slice(2, hq, hq + hkv),
                   v = qkv.tensor().slice(2, hq + hkv, hq + 2 * hkv), o = opad.tensor().slice(2, 0, hq);
      AttentionOptions opt;
      opt.causal = true;
      flash_attention(q, k, v, o, lse, opt);
      Buffer ro(DType::f32, {b, s, hq, d}), rl(DType::f32, {b, hq, s}), got(t, {b, s, hq, d});
      reference::attention_forward({&q, &k, &v, opt}, ro, rl);
      for (int64_t x = 0; x < b; ++x)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t h = 0; h < hq; ++h)
            std::memcpy(got.tensor().ptr({x, i, h, 0}), o.ptr({x, i, h, 0}), size_t(d) * dtype_size(t));
      CheckResult r = compare_relative(got, ro, tolerance(t));
      EXPECT_TRUE(r.pass) << dtype_name(t) << ": " << r.error << " " << r.detail;
    });
}

TEST(Attention, NaNPropagatesToTheRowsThatSeeIt) {
  const Shape s{1, 64, 64, 2, 1, 64, 64, true};
  for (DType t : {DType::f32, DType::bf16})
    for_each_bf16_path([&] {
      Inputs in(s, t, 5);
      store_from_double(in.q.tensor().ptr({0, 10, 1, 3}), t, 0, std::nan(""));  // query 10 of head 1
      store_from_double(in.k.tensor().ptr({0, 40, 0, 7}), t, 0, std::nan(""));  // key 40
      flash_attention(in.q, in.k, in.v, in.o, in.lse, s.options());
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 64; ++i) {
          const bool nan_row = i >= 40 || (h == 1 && i == 10);
          const double o = load_as_double(in.o.tensor().ptr({0, i, h, 0}), t, 0);
          const float l = *static_cast<const float*>(in.lse.tensor().ptr({0, h, i}));
          EXPECT_EQ(std::isnan(o), nan_row) << dtype_name(t) << " head " << h << " row " << i;
          EXPECT_EQ(std::isnan(l), nan_row) << dtype_name(t) << " head " << h << " row " << i;
        }
    });
}

TEST(Attention, BitwiseIdenticalForOneAndTwoThreads) {
  const Shape s{2, 150, 210, 4, 2, 128, 128, true};
  for (DType t : {DType::f32, DType::bf16}) {
    Inputs one(s, t, 9), two(s, t, 9);
    set_num_threads(1);
    flash_attention(one.q, one.k, one.v, one.o, one.lse, s.options());
    set_num_threads(2);
    flash_attention(two.q, two.k, two.v, two.o, two.lse, s.options());
    set_num_threads(0);
    EXPECT_TRUE(compare_bitwise(two.o, one.o).pass) << dtype_name(t);
    EXPECT_TRUE(compare_bitwise(two.lse, one.lse).pass) << dtype_name(t);
  }
}

TEST(Attention, LseIsOptional) {
  const Shape s{1, 20, 30, 2, 2, 64, 64};
  Inputs in(s, DType::bf16, 4), ref(s, DType::bf16, 4);
  flash_attention(in.q, in.k, in.v, in.o, Tensor(), s.options());
  flash_attention(ref.q, ref.k, ref.v, ref.o, ref.lse, s.options());
  EXPECT_TRUE(compare_bitwise(in.o, ref.o).pass);
}

using testing_errors::message_of;

TEST(Attention, BadInputThrowsWithClearMessages) {
  auto bf = [](std::initializer_list<int64_t> s) { return Buffer(DType::bf16, s); };
  Buffer q = bf({1, 8, 6, 64}), k = bf({1, 8, 4, 64}), v = bf({1, 8, 4, 64}), o = bf({1, 8, 6, 64});
  Buffer lse(DType::f32, {1, 6, 8});
  EXPECT_EQ(message_of([&] { flash_attention(q, k, v, o, lse); }),
            "flash_attention: q has 6 heads but k has 4: Hq must be a positive multiple of Hkv (GQA / MQA)");
  Buffer k2 = bf({1, 8, 2, 64}), v2 = bf({1, 8, 2, 64}), qf(DType::f32, {1, 8, 6, 64});
  EXPECT_EQ(message_of([&] { flash_attention(qf, k2, v2, o, lse); }),
            "flash_attention: k.dtype = bf16 but must match q.dtype");
  Buffer qi(DType::i8, {1, 8, 6, 64});
  EXPECT_EQ(message_of([&] { flash_attention(qi, k2, v2, o, lse); }),
            "flash_attention: q.dtype = i8 but must be f32 or bf16");
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, v2, bf({1, 8, 6, 32}), lse); }),
            "flash_attention: o.shape = [1, 8, 6, 32] but must be [1, 8, 6, 64]");
  EXPECT_EQ(message_of([&] { flash_attention(q, bf({1, 8, 2, 32}), v2, o, lse); }),
            "flash_attention: q has head dim 64 but k has 32 (Dqk must match)");
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, bf({1, 9, 2, 64}), o, lse); }),
            "flash_attention: v.shape = [1, 9, 2, 64] but k.shape = [1, 8, 2, 64] (all but the head dim must match)");
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, v2, o, Buffer(DType::f32, {1, 8, 6})); }),
            "flash_attention: lse.shape = [1, 8, 6] but must be [1, 6, 8]");
  EXPECT_EQ(message_of([&] { flash_attention(bf({1, 8, 6, 12}), bf({1, 8, 2, 12}), v2, o, lse); }),
            "flash_attention: Dqk = 12 but must be a multiple of 8 in [8, 256]");
  AttentionOptions bad_scale;
  bad_scale.softmax_scale = -1.0f;
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, v2, o, lse, bad_scale); }),
            "flash_attention: softmax_scale = -1 but must be finite and > 0");
  AttentionOptions bad_window;
  bad_window.window_left = -3;
  EXPECT_NE(message_of([&] { flash_attention(q, k2, v2, o, lse, bad_window); }).find("window = (-3, -1)"),
            std::string::npos);
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, v2, q, lse); }), "flash_attention: o and q overlap in memory");

  // varlen
  Buffer vq = bf({10, 6, 64}), vk = bf({12, 2, 64}), vv = bf({12, 2, 64}), vo = bf({10, 6, 64});
  Buffer vl(DType::f32, {6, 10}), cq(DType::i32, {3}), ck(DType::i32, {3}), c64(DType::f32, {3});
  auto set = [](Buffer& b, std::vector<int32_t> x) { std::copy(x.begin(), x.end(), b.tensor().data_as<int32_t>()); };
  set(cq, {0, 4, 10});
  set(ck, {0, 7, 12});
  AttentionOptions vo_opt;
  vo_opt.cu_seqlens_q = &cq.tensor();
  vo_opt.cu_seqlens_k = &ck.tensor();
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, vo_opt); }), "(no error)");
  set(cq, {0, 6, 4});
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, vo_opt); }),
            "flash_attention: cu_seqlens_q[2] = 4 is less than cu_seqlens_q[1] = 6 (offsets must not decrease)");
  set(cq, {0, 4, 9});
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, vo_opt); }),
            "flash_attention: cu_seqlens_q[2] = 9 but q has 10 tokens");
  set(cq, {1, 4, 10});
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, vo_opt); }),
            "flash_attention: cu_seqlens_q[0] = 1 but must be 0");
  set(cq, {0, 4, 10});
  AttentionOptions only_q;
  only_q.cu_seqlens_q = &cq.tensor();
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, only_q); }),
            "flash_attention: cu_seqlens_q and cu_seqlens_k must be given together (varlen) or not at all");
  AttentionOptions f32_cu = vo_opt;
  f32_cu.cu_seqlens_k = &c64.tensor();
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, vl, f32_cu); }),
            "flash_attention: cu_seqlens_k.dtype = f32 but must be i32");
  EXPECT_EQ(message_of([&] { flash_attention(vq, vk, vv, vo, Buffer(DType::f32, {1, 6, 10}), vo_opt); }),
            "flash_attention: lse.shape = [1, 6, 10] but must be [6, 10] (varlen: [Hq, total_q])");
  EXPECT_EQ(message_of([&] { flash_attention(q, k2, v2, o, lse, vo_opt); }),
            "flash_attention: q.shape = [1, 8, 6, 64] but must be [total_q, Hq, Dqk] (varlen)");
}

TEST(Attention, RegistryChecksPassOnEveryPath) { testing_paths::expect_registry_checks_pass("attention"); }

}  // namespace
}  // namespace sol
