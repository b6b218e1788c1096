// Software pipelining for the CPU: in a loop marked stages=S, every copy from a tensor is
// preceded by a prefetch of the region the same copy will read S - 1 iterations later, so the
// next tiles stream into the cache while this one is computed (the CPU counterpart of
// TileLang's multi-buffered async copies: the caches are the buffers). The stages attribute
// is consumed.
#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"

namespace sol::tile {

namespace {

void pipeline_body(const Program& p, std::vector<Stmt>& body) {
  for (Stmt& s : body) {
    pipeline_body(p, s.body);
    if (s.kind != Stmt::loop || s.int_attr("stages", 1) <= 1) continue;
    const int64_t ahead = s.int_attr("stages", 1) - 1;
    const Expr next = make_binary("+", make_var(s.name), make_int(ahead));
    std::vector<Stmt> out;
    for (Stmt& c : s.body) {
      if (c.kind == Stmt::copy && p.param(c.refs[0].name)) {
        Stmt pre = c;
        pre.kind = Stmt::prefetch;
        for (Expr& e : pre.refs[0].index) e = substitute(e, s.name, next);
        out.push_back(std::move(pre));
      }
      out.push_back(std::move(c));
    }
    s.body = std::move(out);
    s.attrs.erase("stages");
  }
}

}  // namespace

void software_pipeline(Program& p) { pipeline_body(p, p.body); }

}  // namespace sol::tile
