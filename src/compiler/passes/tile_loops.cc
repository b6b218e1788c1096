// Loop tiling: `for v in LO .. HI tile=T` becomes a loop over whole tiles of T iterations with
// a constant-trip inner loop, then a remainder loop for the last (HI - LO) % T iterations:
//
//   for v_tile in 0 .. (HI - LO) / T {
//     for v_in in 0 .. T [unroll] [stages=S] { body[v := LO + v_tile * T + v_in] }
//   }
//   for v in LO + (HI - LO) / T * T .. HI [stages=S] { body }
//
// The inner loop has constant bounds, so `unroll` on a tiled loop unrolls it T times even when
// HI is a runtime dim (partial unrolling); the remainder is never unrolled. Constant bounds
// fold, and a remainder (or a main loop) that cannot run is left out.
#include <set>

#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"
#include "sol/error.h"

namespace sol::tile {

namespace {

class Tiler {
 public:
  explicit Tiler(Program& p) : p_(p) {
    for (const Param& q : p.params) {
      used_.insert(q.name);
      for (const Expr& d : q.shape)
        if (d->kind == ExprNode::var) used_.insert(d->name);
    }
    for (const GridAxis& a : p.grid) used_.insert(a.name);
    walk(p.body, [&](const Stmt& s) {
      if (s.kind == Stmt::alloc || s.kind == Stmt::loop) used_.insert(s.name);
      for (const std::string& v : s.vars) used_.insert(v);
    });
  }

  void run(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      run(s.body);
      if (s.kind != Stmt::loop || !s.has("tile")) {
        out.push_back(std::move(s));
        continue;
      }
      const int64_t t = s.int_attr("tile", 0);
      check(t >= 1, "kernel " + p_.name + ", line " + std::to_string(s.line), "tile=", s.attrs.at("tile"),
            " must be an integer >= 1");
      const Expr lo = s.exprs[0], hi = s.exprs[1];
      // Index division is C++'s (toward zero); fold() leaves '/' alone because value
      // expressions share it, so a constant trip count is divided here.
      const Expr trip = fold(make_binary("-", hi, lo));
      const Expr tiles = trip->kind == ExprNode::integer ? make_int(trip->ivalue / t)
                                                         : make_binary("/", trip, make_int(t));
      const std::string outer = fresh(s.name + "_tile"), inner = fresh(s.name + "_in");

      Stmt in_loop = s;
      in_loop.attrs.erase("tile");
      in_loop.name = inner;
      in_loop.exprs = {make_int(0), make_int(t)};
      const Expr at = make_binary("+", make_binary("+", lo, make_binary("*", make_var(outer), make_int(t))),
                                  make_var(inner));
      for (Stmt& c : in_loop.body) substitute(c, s.name, at);

      Stmt out_loop;
      out_loop.kind = Stmt::loop;
      out_loop.line = s.line;
      out_loop.name = outer;
      out_loop.exprs = {make_int(0), tiles};
      out_loop.body.push_back(std::move(in_loop));
      if (!(tiles->kind == ExprNode::integer && tiles->ivalue <= 0)) out.push_back(std::move(out_loop));

      Stmt rest = std::move(s);
      rest.attrs.erase("tile");
      rest.attrs.erase("unroll");
      rest.exprs[0] = fold(make_binary("+", lo, make_binary("*", tiles, make_int(t))));
      const Expr left = fold(make_binary("-", rest.exprs[1], rest.exprs[0]));
      if (!(left->kind == ExprNode::integer && left->ivalue <= 0)) out.push_back(std::move(rest));
    }
    body = std::move(out);
  }

 private:
  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 2; used_.count(n); ++i) n = base + std::to_string(i);
    used_.insert(n);
    return n;
  }
  Program& p_;
  std::set<std::string> used_;
};

}  // namespace

void tile_loops(Program& p) { Tiler(p).run(p.body); }

}  // namespace sol::tile
