// Tile-op lowering for the CPU: a gemm on packed tiles becomes the BLIS inner loops around the
// 12 x 32 micro-kernel (src/kernels/gemm.h): 32-column B panels outside, so one B micro-panel
// stays in L1 while every 12-row A panel streams past it, and a last partial panel where the
// tile is not a multiple of 12 rows or 32 columns. Copies, reductions and element-wise loops
// stay tile-level here: code generation turns them into packing routines and vector loops.
#include <algorithm>
#include <map>

#include "compiler/ir/rewrite.h"
#include "compiler/layout.h"
#include "compiler/passes/passes.h"

namespace sol::tile {

namespace {

Stmt ukernel_call(const Stmt& gemm, const Expr& row, const Expr& col, int64_t m, int64_t n, int64_t k) {
  Stmt u;
  u.kind = Stmt::ukernel;
  u.line = gemm.line;
  const bool ta = gemm.has("trans_a"), tb = gemm.has("trans_b");
  // Offsets are in the tiles' own (stored) coordinates.
  u.refs = {Ref{gemm.refs[0].name, ta ? std::vector<Expr>{make_int(0), row} : std::vector<Expr>{row, make_int(0)}},
            Ref{gemm.refs[1].name, tb ? std::vector<Expr>{col, make_int(0)} : std::vector<Expr>{make_int(0), col}},
            Ref{gemm.refs[2].name, {row, col}}};
  u.attrs = {{"m", std::to_string(m)}, {"n", std::to_string(n)}, {"k", std::to_string(k)}};
  for (const char* f : {"clear", "trans_a", "trans_b"})
    if (gemm.has(f)) u.attrs[f] = "";
  return u;
}

Stmt loop(const std::string& var, int64_t trips, int line, std::vector<Stmt> body) {
  Stmt l;
  l.kind = Stmt::loop;
  l.line = line;
  l.name = var;
  l.exprs = {make_int(0), make_int(trips)};
  l.body = std::move(body);
  return l;
}

// The micro-kernel calls of one gemm, in the order jr (B panels) -> ir (A panels).
using Allocs = std::map<std::string, Stmt>;

std::vector<Stmt> lower_gemm(const Allocs& tiles, const Stmt& g) {
  const Stmt& c = tiles.at(g.refs[2].name);
  const Stmt& a = tiles.at(g.refs[0].name);
  const int64_t m = c.shape[0], n = c.shape[1], k = a.shape[g.has("trans_a") ? 0 : 1];
  const int64_t full_m = m / kPanelRows, tail_m = m % kPanelRows, full_n = n / kPanelCols, tail_n = n % kPanelCols;
  const std::string ir = "ir" + std::to_string(g.line), jr = "jr" + std::to_string(g.line);
  auto column = [&](const Expr& col, int64_t cols) {
    std::vector<Stmt> body;
    if (full_m > 0) {
      const Expr row = make_binary("*", make_var(ir), make_int(kPanelRows));
      body.push_back(loop(ir, full_m, g.line, {ukernel_call(g, row, col, kPanelRows, cols, k)}));
      if (full_m == 1) body.back() = ukernel_call(g, make_int(0), col, kPanelRows, cols, k);
    }
    if (tail_m > 0) body.push_back(ukernel_call(g, make_int(full_m * kPanelRows), col, tail_m, cols, k));
    return body;
  };
  std::vector<Stmt> out;
  if (full_n > 0) {
    std::vector<Stmt> body = column(make_binary("*", make_var(jr), make_int(kPanelCols)), kPanelCols);
    if (full_n == 1) {
      for (Stmt& s : body) substitute(s, jr, make_int(0));
      out = std::move(body);
    } else {
      out.push_back(loop(jr, full_n, g.line, std::move(body)));
    }
  }
  if (tail_n > 0)
    for (Stmt& s : column(make_int(full_n * kPanelCols), tail_n)) out.push_back(std::move(s));
  return out;
}

void lower_body(const Allocs& tiles, std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (Stmt& s : body) {
    lower_body(tiles, s.body);
    if (s.kind != Stmt::gemm) {
      out.push_back(std::move(s));
      continue;
    }
    for (Stmt& u : lower_gemm(tiles, s)) out.push_back(std::move(u));
  }
  body = std::move(out);
}

}  // namespace

void lower_cpu(Program& p) {
  Allocs tiles;  // copied first: lowering moves statements while it rewrites the body
  walk(p.body, [&](const Stmt& s) {
    if (s.kind == Stmt::alloc) tiles[s.name] = s;
  });
  lower_body(tiles, p.body);
}

}  // namespace sol::tile
