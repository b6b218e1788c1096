// Flash attention backward: the fp64 reference gradients against finite differences of the
// reference forward, the op against the reference gradients on every ISA path, determinism
// across thread counts, and bad input.
#include <gtest/gtest.h>

#include <cmath>
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

struct Problem {
  Buffer q, k, v, o, lse, d_o, dq, dk, dv;
  Problem(const Shape& s, DType t, uint64_t seed)
      : q(t, {s.b, s.sq, s.hq, s.dqk}), k(t, {s.b, s.skv, s.hkv, s.dqk}), v(t, {s.b, s.skv, s.hkv, s.dv}),
        o(t, {s.b, s.sq, s.hq, s.dv}), lse(DType::f32, {s.b, s.hq, s.sq}), d_o(t, {s.b, s.sq, s.hq, s.dv}),
        dq(t, {s.b, s.sq, s.hq, s.dqk}), dk(t, {s.b, s.skv, s.hkv, s.dqk}), dv(t, {s.b, s.skv, s.hkv, s.dv}) {
    fill_random(q, seed + 1, 2.0);
    fill_random(k, seed + 2, 1.5);
    fill_random(v, seed + 3, 1.0);
    fill_random(d_o, seed + 4, 1.0);
  }
  void run(const AttentionOptions& opt) {
    flash_attention(q, k, v, o, lse, opt);
    for (const Buffer* b : {&dq, &dk, &dv}) poison(*b);
    flash_attention_backward(q, k, v, o, lse, d_o, dq, dk, dv, opt);
  }
};

// sum(o * d_o) by the fp64 reference forward.
double loss(const reference::AttentionInputs& in, const Tensor& d_o) {
  double l = 0;
  std::vector<double> o, lse;
  for (int64_t b = 0; b < in.batch(); ++b)
    for (int64_t h = 0; h < in.hq(); ++h) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < in.sq(b); ++i) rows.push_back(i);
      reference::attention_rows(in, b, h, rows, o, lse);
      for (int64_t i = 0; i < in.sq(b); ++i)
        for (int64_t d = 0; d < in.dv(); ++d)
          l += o[size_t(i * in.dv() + d)] * load_as_double(d_o.ptr({b, i, h, d}), d_o.dtype(), 0);
    }
  return l;
}

TEST(AttentionBackward, ReferenceGradientsMatchFiniteDifferences) {
  const Shape shapes[] = {{1, 5, 7, 2, 1, 8, 16, true}, {2, 6, 4, 2, 2, 16, 8, false, 2, 1},
                          {1, 7, 3, 1, 1, 8, 8, true}};  // rows 0..3 see nothing
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.describe());
    Problem p(s, DType::f32, 3);
    const AttentionOptions opt = s.options();
    const reference::AttentionInputs in{&p.q.tensor(), &p.k.tensor(), &p.v.tensor(), opt};
    Buffer gq(DType::f32, p.q.tensor().shape()), gk(DType::f32, p.k.tensor().shape()), gv(DType::f32, p.v.tensor().shape());
    reference::attention_backward(in, p.d_o, gq, gk, gv);
    for (auto [name, x, g] : {std::tuple<const char*, Buffer*, Buffer*>{"q", &p.q, &gq}, {"k", &p.k, &gk}, {"v", &p.v, &gv}}) {
      Buffer fd(DType::f32, x->tensor().shape());
      float* data = x->tensor().data_as<float>();
      for (int64_t i = 0; i < x->tensor().numel(); ++i) {
        const float keep = data[i];
        const float up = keep + 1e-3f, down = keep - 1e-3f;
        data[i] = up;
        const double l_up = loss(in, p.d_o);
        data[i] = down;
        const double l_down = loss(in, p.d_o);
        data[i] = keep;
        fd.tensor().data_as<float>()[i] = float((l_up - l_down) / (double(up) - double(down)));
      }
      CheckResult r = compare_relative(*g, fd, 1e-4);
      EXPECT_TRUE(r.pass) << "d" << name << ": error " << r.error << " " << r.detail;
    }
  }
}

void expect_matches_reference(const Shape& s, DType t) {
  SCOPED_TRACE(s.describe() + " " + std::string(dtype_name(t)));
  Problem p(s, t, 5);
  const AttentionOptions opt = s.options();
  p.run(opt);
  Buffer rq(DType::f32, p.q.tensor().shape()), rk(DType::f32, p.k.tensor().shape()), rv(DType::f32, p.v.tensor().shape());
  reference::attention_backward({&p.q.tensor(), &p.k.tensor(), &p.v.tensor(), opt}, p.d_o, rq, rk, rv);
  const double tol = t == DType::bf16 ? 2e-2 : 5e-5;
  for (auto [name, got, ref] : {std::tuple<const char*, Buffer*, Buffer*>{"dq", &p.dq, &rq}, {"dk", &p.dk, &rk}, {"dv", &p.dv, &rv}}) {
    CheckResult r = compare_relative(*got, *ref, tol);
    EXPECT_TRUE(r.pass) << name << ": error " << r.error << " " << r.detail;
  }
}

TEST(AttentionBackward, MatchesReferenceGradients) {
  const Shape shapes[] = {
      {1, 1, 1, 1, 1, 64, 64},
      {2, 17, 33, 4, 2, 64, 64, true},
      {1, 40, 17, 2, 1, 128, 128, true},          // Sq > Skv: empty rows
      {1, 77, 130, 3, 3, 192, 128, false, 20, 5},  // MLA-prefill dims, window
      {1, 100, 100, 4, 1, 64, 64, true, 31, -1},   // MQA, causal sliding window
      {1, 29, 50, 2, 2, 8, 16},
  };
  for_each_bf16_path([&] {
    for (const Shape& s : shapes)
      for (DType t : {DType::f32, DType::bf16}) expect_matches_reference(s, t);
  });
}

TEST(AttentionBackward, LongerCausalSequence) {
  expect_matches_reference({1, 300, 300, 2, 1, 128, 128, true}, DType::bf16);
  expect_matches_reference({1, 300, 300, 2, 1, 128, 128, true}, DType::f32);
}

TEST(AttentionBackward, Varlen) {
  const std::vector<int32_t> cq = {0, 5, 5, 38, 38, 39}, ck = {0, 7, 7, 47, 50, 50};
  const int64_t tq = 39, tk = 50, hq = 4, hkv = 2, d = 64;
  for (DType t : {DType::f32, DType::bf16})
    for_each_bf16_path([&] {
      SCOPED_TRACE(dtype_name(t));
      Buffer cu_q(DType::i32, {6}), cu_k(DType::i32, {6});
      std::copy(cq.begin(), cq.end(), cu_q.tensor().data_as<int32_t>());
      std::copy(ck.begin(), ck.end(), cu_k.tensor().data_as<int32_t>());
      Buffer q(t, {tq, hq, d}), k(t, {tk, hkv, d}), v(t, {tk, hkv, d}), o(t, {tq, hq, d}), lse(DType::f32, {hq, tq});
      Buffer g(t, {tq, hq, d}), dq(t, {tq, hq, d}), dk(t, {tk, hkv, d}), dv(t, {tk, hkv, d});
      fill_random(q, 11, 2.0);
      fill_random(k, 12, 1.5);
      fill_random(v, 13, 1.0);
      fill_random(g, 14, 1.0);
      AttentionOptions opt;
      opt.causal = true;
      opt.cu_seqlens_q = &cu_q.tensor();
      opt.cu_seqlens_k = &cu_k.tensor();
      flash_attention(q, k, v, o, lse, opt);
      for (const Buffer* b : {&dq, &dk, &dv}) poison(*b);
      flash_attention_backward(q, k, v, o, lse, g, dq, dk, dv, opt);
      Buffer rq(DType::f32, {tq, hq, d}), rk(DType::f32, {tk, hkv, d}), rv(DType::f32, {tk, hkv, d});
      reference::attention_backward({&q.tensor(), &k.tensor(), &v.tensor(), opt}, g, rq, rk, rv);
      const double tol = t == DType::bf16 ? 2e-2 : 5e-5;
      for (auto [name, got, ref] : {std::tuple<const char*, Buffer*, Buffer*>{"dq", &dq, &rq}, {"dk", &dk, &rk}, {"dv", &dv, &rv}}) {
        CheckResult r = compare_relative(*got, *ref, tol);
        EXPECT_TRUE(r.pass) << name << ": error " << r.error << " " << r.detail;
      }
    });
}

TEST(AttentionBackward, BitwiseIdenticalForOneAndTwoThreads) {
  const Shape s{1, 200, 260, 4, 2, 128, 128, true};
  for (DType t : {DType::f32, DType::bf16}) {
    Problem one(s, t, 8), two(s, t, 8);
    set_num_threads(1);
    one.run(s.options());
    set_num_threads(2);
    two.run(s.options());
    set_num_threads(0);
    for (auto [a, b] : {std::pair<Buffer*, Buffer*>{&one.dq, &two.dq}, {&one.dk, &two.dk}, {&one.dv, &two.dv}})
      EXPECT_TRUE(compare_bitwise(*b, *a).pass) << dtype_name(t);
  }
}

using testing_errors::message_of;

TEST(AttentionBackward, BadInputThrowsWithClearMessages) {
  const Shape s{1, 8, 8, 4, 2, 64, 64};
  Problem p(s, DType::bf16, 1);
  auto call = [&](const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
    return message_of([&] { flash_attention_backward(p.q, p.k, p.v, p.o, p.lse, d_o, dq, dk, dv); });
  };
  EXPECT_EQ(call(p.d_o, p.dq, p.dk, p.dv), "(no error)");
  EXPECT_EQ(call(Buffer(DType::bf16, {1, 8, 4, 32}), p.dq, p.dk, p.dv),
            "flash_attention_backward: d_o.shape = [1, 8, 4, 32] but o.shape = [1, 8, 4, 64]");
  EXPECT_EQ(call(p.d_o, Buffer(DType::f32, {1, 8, 4, 64}), p.dk, p.dv),
            "flash_attention_backward: dq.dtype = f32 but must match q.dtype");
  EXPECT_EQ(call(p.d_o, p.dq, p.dk, p.dk), "flash_attention_backward: dk and dv overlap in memory");
  EXPECT_EQ(call(p.d_o, p.dq, p.k, p.dv), "flash_attention_backward: dk and k overlap in memory");
  EXPECT_EQ(message_of([&] { flash_attention_backward(p.q, p.k, p.v, p.o, Tensor(), p.d_o, p.dq, p.dk, p.dv); }),
            "flash_attention_backward: lse.shape = [] but must be [1, 4, 8]");
}

TEST(AttentionBackward, RegistryChecksPassOnEveryPath) { testing_paths::expect_registry_checks_pass("attention-bwd"); }

}  // namespace
}  // namespace sol
