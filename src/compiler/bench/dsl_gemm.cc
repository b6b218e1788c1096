// The DSL GEMM. Blocking follows the hand-written gemm (src/ops/gemm/blocking.h): KC = 512
// bf16 (a 512 x 32 B micro-panel is 32 KiB of L1), and a 192 x 512 cell: A blocks are packed
// once per 512 columns of C (a 192 x 256 cell packed them twice as often and measured 0.92x of
// the hand-written gemm at 2048^3 against 0.98x for this one, thread CPU time:
// docs/perf/tile-compiler.md). Lowering turns the gemm into the same 12 x 32 micro-kernel calls
// in the same jr -> ir order, skipping the zero padding of ragged edges.
#include "compiler/bench/dsl_gemm.h"

namespace sol::tile {

Program dsl_gemm_bf16() {
  Builder b("gemm_bf16");
  Value m = b.dim("M"), n = b.dim("N"), k = b.dim("K");
  Handle a = b.tensor("A", DType::bf16, {m, k}), bt = b.tensor("B", DType::bf16, {k, n}),
         c = b.tensor("C", DType::f32, {m, n});
  auto [bn, bm] = b.grid<2>({{"bn", ceildiv(n, 512)}, {"bm", ceildiv(m, 192)}});
  Handle a_s = b.scratch("a_s", DType::bf16, {192, 512});
  Handle b_s = b.scratch("b_s", DType::bf16, {512, 512});
  Handle acc = b.fragment("acc", DType::f32, {192, 512});
  b.fill(acc, 0);
  b.for_range("ko", 0, ceildiv(k, 512), [&](Value ko) {
    b.copy(a(bm * 192, ko * 512), a_s);
    b.copy(bt(ko * 512, bn * 512), b_s);
    b.gemm(a_s, b_s, acc);
  }, {.stages = 2});
  b.copy(acc, c(bm * 192, bn * 512));
  return b.finish();
}

}  // namespace sol::tile
