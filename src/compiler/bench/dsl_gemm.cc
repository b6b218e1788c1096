// The DSL GEMM: 192 x 384 cells of C, K in blocks of 1024 (a 1024 x 32 B micro-panel is 64 KiB,
// streamed from L2 as the hand-written gemm streams its 128 KiB ones), the grid running down M
// first. K up to 1024 is then one block, and consecutive cells of a thread read the same B
// block, which reuse-tiles packs once instead of once per cell (the hand-written driver packs
// each B block once for all its A blocks). Measured against 192 x 512 cells with K blocks of
// 512 and stages=2 (whose prefetch of the next tiles cost 1-3%): docs/perf/tile-compiler.md.
// Lowering turns the gemm into the same 12 x 32 micro-kernel calls in the same jr -> ir order,
// skipping the zero padding of ragged edges.
#include "compiler/bench/dsl_gemm.h"

namespace sol::tile {

Program dsl_gemm_bf16() {
  Builder b("gemm_bf16");
  Value m = b.dim("M"), n = b.dim("N"), k = b.dim("K");
  Handle a = b.tensor("A", DType::bf16, {m, k}), bt = b.tensor("B", DType::bf16, {k, n}),
         c = b.tensor("C", DType::f32, {m, n});
  auto [bm, bn] = b.grid<2>({{"bm", ceildiv(m, 192)}, {"bn", ceildiv(n, 384)}});
  Handle a_s = b.scratch("a_s", DType::bf16, {192, 1024});
  Handle b_s = b.scratch("b_s", DType::bf16, {1024, 384});
  Handle acc = b.fragment("acc", DType::f32, {192, 384});
  b.fill(acc, 0);
  b.for_range("ko", 0, ceildiv(k, 1024), [&](Value ko) {
    b.copy(a(bm * 192, ko * 1024), a_s);
    b.copy(bt(ko * 1024, bn * 384), b_s);
    b.gemm(a_s, b_s, acc);
  });
  b.copy(acc, c(bm * 192, bn * 384));
  return b.finish();
}

}  // namespace sol::tile
