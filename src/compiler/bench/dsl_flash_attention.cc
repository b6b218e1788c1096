// The DSL flash attention (FlashAttention-2's forward): a cell owns 128 query rows of one head
// (K and V are packed once per 128 rows: 64 rows measured 0.79x of the hand-written kernel,
// 128 about 0.9x, 192 wastes more rows on ragged sequence ends: docs/perf/tile-compiler.md)
// and walks the keys in blocks of 128 with an online softmax in base 2. Q K^T and P V run on the
// GEMM micro-kernel (the lowering packs q, k, v and p into its panels); the softmax statements
// become vector loops over the 128 x 128 score tile, which stays in L2.
#include "compiler/bench/dsl_flash_attention.h"

#include <cmath>

namespace sol::tile {

Program dsl_flash_attention_bf16() {
  constexpr double kLog2eOverSqrtD = 0.12751743074475066;  // log2(e) / sqrt(128)
  constexpr double kLn2 = 0.6931471805599453;
  constexpr int64_t kRows = 128;  // query rows per cell
  const double inf = INFINITY;
  Builder b("flash_attention");
  Value bb = b.dim("B"), hh = b.dim("H"), sq = b.dim("S"), skv = b.dim("T");
  Handle q_t = b.tensor("Q", DType::bf16, {bb, hh, sq, 128}), k_t = b.tensor("K", DType::bf16, {bb, hh, skv, 128}),
         v_t = b.tensor("V", DType::bf16, {bb, hh, skv, 128}), o_t = b.tensor("O", DType::bf16, {bb, hh, sq, 128}),
         lse_t = b.tensor("LSE", DType::f32, {bb, hh, sq});
  auto [bq, h, bi] = b.grid<3>({{"bq", ceildiv(sq, kRows)}, {"h", hh}, {"b", bb}});
  Handle q = b.scratch("q", DType::bf16, {kRows, 128}), k = b.scratch("k", DType::bf16, {128, 128}),
         v = b.scratch("v", DType::bf16, {128, 128});
  Handle s = b.fragment("s", DType::f32, {kRows, 128}), p = b.fragment("p", DType::bf16, {kRows, 128}),
         acc = b.fragment("acc", DType::f32, {kRows, 128});
  Handle m = b.fragment("m", DType::f32, {kRows}), m_new = b.fragment("m_new", DType::f32, {kRows}),
         l = b.fragment("l", DType::f32, {kRows}), alpha = b.fragment("alpha", DType::f32, {kRows});
  b.copy(q_t(bi, h, bq * kRows, 0), q);
  b.fill(acc, 0);
  b.fill(m, -inf);
  b.fill(l, 0);
  b.for_range("kb", 0, ceildiv(skv, 128), [&](Value kb) {
    b.copy(k_t(bi, h, kb * 128, 0), k);
    b.copy(v_t(bi, h, kb * 128, 0), v);
    b.gemm(q, k, s, {.trans_b = true, .clear = true});
    b.parallel({"i", "j"}, s, [&](auto ij) {
      b.assign(s(ij[0], ij[1]), select(kb * 128 + ij[1] < skv, s(ij[0], ij[1]) * kLog2eOverSqrtD, -inf));
    });
    b.reduce_max(s, m_new, 1);
    b.parallel({"i"}, m, [&](auto i) {
      b.assign(m_new(i[0]), max(m_new(i[0]), m(i[0])));
      b.assign(alpha(i[0]), exp2(m(i[0]) - m_new(i[0])));
      b.assign(m(i[0]), m_new(i[0]));
      b.assign(l(i[0]), l(i[0]) * alpha(i[0]));
    });
    b.parallel({"i", "j"}, s, [&](auto ij) { b.assign(s(ij[0], ij[1]), exp2(s(ij[0], ij[1]) - m(ij[0]))); });
    b.reduce_sum(s, l, 1, /*clear=*/false);
    b.parallel({"i", "j"}, acc, [&](auto ij) { b.assign(acc(ij[0], ij[1]), acc(ij[0], ij[1]) * alpha(ij[0])); });
    b.copy(s, p);
    b.gemm(p, v, acc);
  });
  b.parallel({"i", "j"}, acc, [&](auto ij) { b.assign(acc(ij[0], ij[1]), acc(ij[0], ij[1]) / l(ij[0])); });
  b.parallel({"i"}, l, [&](auto i) { b.assign(l(i[0]), log(l(i[0])) + m(i[0]) * kLn2); });
  b.copy(acc, o_t(bi, h, bq * kRows, 0));
  b.copy(l, lse_t(bi, h, bq * kRows));
  return b.finish();
}

}  // namespace sol::tile
