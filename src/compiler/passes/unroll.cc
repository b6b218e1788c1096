// Loop unrolling: a loop marked `unroll` with constant bounds is replaced by one copy of its
// body per iteration, the variable folded into each copy's indices.
#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"
#include "sol/error.h"

namespace sol::tile {

namespace {

void unroll_body(const Program& p, std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (Stmt& s : body) {
    unroll_body(p, s.body);
    if (s.kind != Stmt::loop || !s.has("unroll")) {
      out.push_back(std::move(s));
      continue;
    }
    const Expr lo = fold(s.exprs[0]), hi = fold(s.exprs[1]);
    check(lo->kind == ExprNode::integer && hi->kind == ExprNode::integer,
          "kernel " + p.name + ", line " + std::to_string(s.line), "unroll needs constant loop bounds, got ",
          print(s.exprs[0]), " .. ", print(s.exprs[1]));
    for (int64_t i = lo->ivalue; i < hi->ivalue; ++i)
      for (const Stmt& c : s.body) {
        Stmt copy = c;
        substitute(copy, s.name, make_int(i));
        out.push_back(std::move(copy));
      }
  }
  body = std::move(out);
}

}  // namespace

void unroll_loops(Program& p) { unroll_body(p, p.body); }

}  // namespace sol::tile
