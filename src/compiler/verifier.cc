// The verifier: names, shapes, dtypes, constant bounds, layouts, attributes and budgets of a
// tile program. Every error names the kernel and the line of the offending statement.
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "compiler/ir/rewrite.h"
#include "compiler/layout.h"
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {

namespace {

const std::set<std::string> kLayouts = {"row", "packed_a", "packed_at", "packed_b", "packed_bt"};

bool packed(const Stmt& alloc) {
  auto it = alloc.attrs.find("layout");
  return it != alloc.attrs.end() && it->second != "row";
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

class Verifier {
 public:
  explicit Verifier(const Program& p) : p_(p) {}

  void run() {
    line_ = p_.line;
    check_ok(!p_.name.empty(), "the kernel has no name");
    for (const Param& q : p_.params) {
      declare(q.name, "tensor");
      check_ok(!q.shape.empty(), "tensor ", q.name, " has no dims");
      for (const Expr& d : q.shape) {
        if (d->kind == ExprNode::var) {
          if (!dims_.count(d->name)) declare(d->name, "dim");
          dims_.insert(d->name);
        } else {
          check_ok(d->kind == ExprNode::integer && d->ivalue >= 0, "tensor ", q.name,
                   " has a dim that is neither a name nor an integer >= 0");
        }
      }
    }
    check_ok(!p_.grid.empty(), "the kernel has no grid axis");
    for (const GridAxis& a : p_.grid) {
      index_expr(a.extent, "grid extent");
      declare(a.name, "grid axis");
      ints_.insert(a.name);
    }
    for (const auto& [k, v] : p_.attrs) check_ok(k == "arena", "unknown kernel attribute '", k, "'");
    body(p_.body, false);
  }

 private:
  template <class... P> void check_ok(bool ok, P&&... parts) {
    if (!ok) fail("kernel " + p_.name + ", line " + std::to_string(line_), std::forward<P>(parts)...);
  }

  void declare(const std::string& n, const char* what) {
    auto it = kinds_.find(n);
    check_ok(it == kinds_.end(), what, " '", n, "' is already declared as a ", it == kinds_.end() ? "" : it->second);
    kinds_[n] = what;
  }

  // An integer expression over dims, grid axes and loop variables.
  void index_expr(const Expr& e, const char* what) {
    switch (e->kind) {
      case ExprNode::integer: return;
      case ExprNode::real: check_ok(false, what, " must be an integer, got ", print(e)); return;
      case ExprNode::load: check_ok(false, what, " must be an integer, got the tile load ", print(e)); return;
      case ExprNode::var:
        check_ok(ints_.count(e->name) || dims_.count(e->name), "unknown name '", e->name, "' in ", what);
        return;
      case ExprNode::binary:
        check_ok(e->name != "<" && e->name != "<=" && e->name != "==", what, " must be an integer, got ", print(e));
        for (const Expr& a : e->args) index_expr(a, what);
        return;
      case ExprNode::call:
        check_ok(e->name == "ceildiv" || e->name == "min" || e->name == "max", what,
                 " may call only ceildiv, min and max, got ", e->name);
        check_ok(int(e->args.size()) == call_arity(e->name), e->name, " takes ", call_arity(e->name), " arguments");
        for (const Expr& a : e->args) index_expr(a, what);
        return;
    }
  }

  // A value expression: f32 arithmetic over tile elements, constants and indices.
  void value_expr(const Expr& e) {
    switch (e->kind) {
      case ExprNode::integer:
      case ExprNode::real: return;
      case ExprNode::var:
        check_ok(ints_.count(e->name) || dims_.count(e->name), "unknown name '", e->name, "'");
        return;
      case ExprNode::binary:
        for (const Expr& a : e->args) value_expr(a);
        return;
      case ExprNode::call:
        check_ok(call_arity(e->name) >= 0, "unknown function '", e->name, "'");
        check_ok(int(e->args.size()) == call_arity(e->name), e->name, " takes ", call_arity(e->name),
                 " arguments, got ", e->args.size());
        for (const Expr& a : e->args) value_expr(a);
        return;
      case ExprNode::load: element(Ref{e->name, e->args});
    }
  }

  const Stmt& tile(const std::string& n, const char* role) {
    auto it = tiles_.find(n);
    if (it == tiles_.end())
      check_ok(false, role, " '", n, "' is ", p_.param(n) ? "a tensor, not a tile" : "not declared");
    return *it->second;
  }

  // An element access t[i, j] (one index per dim, inside tile bounds when constant).
  void element(const Ref& r) {
    const Stmt& t = tile(r.name, "tile");
    check_ok(!packed(t), "bad layout: ", r.name, " has layout ", packed(t) ? t.attrs.at("layout") : "row",
             " and its elements cannot be addressed one by one");
    check_ok(r.index.size() == t.shape.size(), r.name, " has ", t.shape.size(), " dims but is indexed with ",
             r.index.size());
    for (size_t d = 0; d < r.index.size(); ++d) {
      index_expr(r.index[d], "an index");
      const Expr& i = r.index[d];
      if (i->kind == ExprNode::integer)
        check_ok(i->ivalue >= 0 && i->ivalue < t.shape[d], "index ", i->ivalue, " of ", r.name, " dim ", d,
                 " is out of bounds [0, ", t.shape[d], ")");
    }
  }

  const Stmt& whole_tile(const Ref& r, const char* role) {
    const Stmt& t = tile(r.name, role);
    check_ok(r.index.empty(), role, " ", r.name, " must be a whole tile (no offsets)");
    return t;
  }

  void tensor_region(const Ref& r, const Stmt& t) {
    const Param* q = p_.param(r.name);
    check_ok(q != nullptr, "'", r.name, "' is not a tensor");
    check_ok(r.index.size() == q->shape.size(), "tensor ", r.name, " has ", q->shape.size(),
             " dims but the region gives ", r.index.size(), " offsets");
    check_ok(t.shape.size() <= q->shape.size(), "tile ", t.name, " has ", t.shape.size(),
             " dims, more than tensor ", r.name, " (", q->shape.size(), ")");
    for (const Expr& e : r.index) index_expr(e, "a region offset");
  }

  void attrs(const Stmt& s, std::set<std::string> allowed) {
    for (const auto& [k, v] : s.attrs) check_ok(allowed.count(k), "unknown attribute '", k, "'");
  }

  void body(const std::vector<Stmt>& stmts, bool in_parallel) {
    for (const Stmt& s : stmts) stmt(s, in_parallel);
  }

  // A tile must fit a grid cell's share of the target's memory, and so must all of them
  // together (an upper bound of the arena plan-scratch lays out).
  void budget(const Stmt& s) {
    int64_t elements = 1;
    for (int64_t d : s.shape)
      check_ok(!__builtin_mul_overflow(elements, d, &elements) && elements <= kMaxCellBytes, "tile ", s.name, " ",
               shape_text(s.shape), " is larger than the ", kMaxCellBytes >> 20, " MiB a grid cell may hold");
    const int64_t bytes = (tile_bytes(s) + 63) / 64 * 64;
    check_ok(bytes <= kMaxCellBytes, "tile ", s.name, " ", shape_text(s.shape), " is larger than the ",
             kMaxCellBytes >> 20, " MiB a grid cell may hold");
    check_ok(bytes <= kMaxCellBytes - cell_bytes_, "tile ", s.name, " ", shape_text(s.shape), " (", bytes,
             " bytes) takes the tiles of a grid cell past the ", kMaxCellBytes >> 20, " MiB they may hold");
    cell_bytes_ += bytes;
  }

  // Copies of its body that unrolling `s` makes; their total over the program is bounded.
  int64_t unroll_trips(const Stmt& s) {
    int64_t trips = 0;
    if (s.has("tile")) {
      trips = s.int_attr("tile", 1);
    } else {
      const Expr lo = fold(s.exprs[0]), hi = fold(s.exprs[1]);
      if (lo->kind != ExprNode::integer || hi->kind != ExprNode::integer) return 1;  // the unroll pass says why
      if (__builtin_sub_overflow(hi->ivalue, lo->ivalue, &trips)) trips = INT64_MAX;
      trips = std::max<int64_t>(trips, 0);
    }
    check_ok(trips <= kMaxUnrollTrips, "unroll of ", trips, " iterations (at most ", kMaxUnrollTrips, ")");
    return std::max<int64_t>(trips, 1);
  }

  void stmt(const Stmt& s, bool in_parallel) {
    line_ = s.line;
    statements_ += copies_;
    check_ok(statements_ <= kMaxStatements, "unrolled, the kernel has more than ", kMaxStatements, " statements");
    check_ok(!in_parallel || s.kind == Stmt::assign, "only assignments may appear inside parallel");
    switch (s.kind) {
      case Stmt::alloc: {
        attrs(s, {"layout", "offset", "reuse", "widened"});
        declare(s.name, "tile");
        check_ok(!s.shape.empty(), "tile ", s.name, " has no dims");
        for (int64_t d : s.shape) check_ok(d > 0, "tile ", s.name, " has a dim ", d, " (must be > 0)");
        check_ok(s.dtype == DType::f32 || s.dtype == DType::bf16, "tile ", s.name, " is ", dtype_name(s.dtype),
                 " but tiles are f32 or bf16");
        if (s.has("layout"))
          check_ok(kLayouts.count(s.attrs.at("layout")) != 0, "bad layout '", s.attrs.at("layout"), "' for ", s.name);
        check_ok(!packed(s) || s.shape.size() == 2, "bad layout: packed tile ", s.name, " must be 2-D");
        if (s.has("widened")) {
          const std::string l = s.has("layout") ? s.attrs.at("layout") : "row";
          check_ok(s.dtype == DType::bf16 && (l == "packed_a" || l == "packed_at"), "bad layout: ", s.name,
                   " is widened, which only a bf16 tile with layout packed_a or packed_at can be (it is ",
                   dtype_name(s.dtype), ", ", l, ")");
        }
        budget(s);
        tiles_[s.name] = &s;
        return;
      }
      case Stmt::fill:
        attrs(s, {});
        whole_tile(s.refs[0], "fill destination");
        check_ok(!packed(tile(s.refs[0].name, "")), "bad layout: fill of packed tile ", s.refs[0].name);
        value_expr(s.exprs[0]);
        return;
      case Stmt::copy:
      case Stmt::prefetch: {
        attrs(s, s.kind == Stmt::copy ? std::set<std::string>{"reuse"} : std::set<std::string>{});
        const bool src_tile = tiles_.count(s.refs[0].name), dst_tile = tiles_.count(s.refs[1].name);
        check_ok(src_tile != dst_tile || (src_tile && dst_tile && s.kind == Stmt::copy),
                 "copy needs a tensor region and a tile (got ", s.refs[0].name, " and ", s.refs[1].name, ")");
        if (src_tile && dst_tile) {
          const Stmt &a = whole_tile(s.refs[0], "copy source"), &b = whole_tile(s.refs[1], "copy destination");
          check_ok(a.shape == b.shape, "copy: ", a.name, " is ", shape_text(a.shape), " but ", b.name, " is ",
                   shape_text(b.shape));
          check_ok(!packed(a), "bad layout: copy out of packed tile ", a.name);
          check_ok(a.shape.size() <= 2, "copy: tile to tile copies are of 1-D or 2-D tiles");
          return;
        }
        const Ref& t = src_tile ? s.refs[0] : s.refs[1];
        const Stmt& decl = whole_tile(t, "copy tile");
        tensor_region(src_tile ? s.refs[1] : s.refs[0], decl);
        check_ok(!(src_tile && packed(decl)), "bad layout: copy out of packed tile ", t.name);
        return;
      }
      case Stmt::cast: {
        attrs(s, {});
        const Stmt &a = whole_tile(s.refs[0], "cast source"), &b = whole_tile(s.refs[1], "cast destination");
        check_ok(a.shape == b.shape, "cast: ", a.name, " is ", shape_text(a.shape), " but ", b.name, " is ",
                 shape_text(b.shape));
        check_ok(!packed(a) && !packed(b), "bad layout: cast of a packed tile");
        return;
      }
      case Stmt::gemm: {
        attrs(s, {"trans_a", "trans_b", "clear"});
        const Stmt& a = whole_tile(s.refs[0], "gemm operand a");
        const Stmt& b = whole_tile(s.refs[1], "gemm operand b");
        const Stmt& c = whole_tile(s.refs[2], "gemm accumulator");
        check_ok(a.shape.size() == 2 && b.shape.size() == 2 && c.shape.size() == 2, "gemm: tiles must be 2-D");
        const bool ta = s.has("trans_a"), tb = s.has("trans_b");
        const int64_t m = a.shape[ta ? 1 : 0], ka = a.shape[ta ? 0 : 1];
        const int64_t kb = b.shape[tb ? 1 : 0], n = b.shape[tb ? 0 : 1];
        check_ok(ka == kb, "gemm: ", a.name, ".shape[", ta ? 0 : 1, "] = ", ka, " but ", b.name, ".shape[",
                 tb ? 1 : 0, "] = ", kb);
        check_ok(c.shape[0] == m && c.shape[1] == n, "gemm: ", c.name, " is ", shape_text(c.shape), " but ",
                 a.name, " x ", b.name, " is [", m, ", ", n, "]");
        check_ok(a.dtype == b.dtype, "gemm: ", a.name, " is ", dtype_name(a.dtype), " but ", b.name, " is ",
                 dtype_name(b.dtype));
        check_ok(c.dtype == DType::f32, "gemm: accumulator ", c.name, " is ", dtype_name(c.dtype), " but must be f32");
        check_ok(!packed(c), "bad layout: accumulator ", c.name, " must have layout row");
        return;
      }
      case Stmt::ukernel: {
        attrs(s, {"m", "n", "k", "clear", "trans_a", "trans_b"});
        for (const Ref& r : s.refs) {
          tile(r.name, "ukernel operand");
          for (const Expr& e : r.index) index_expr(e, "a panel offset");
        }
        return;
      }
      case Stmt::reduce: {
        attrs(s, {"axis", "clear"});
        check_ok(s.name == "sum" || s.name == "max", "unknown reduction '", s.name, "' (sum or max)");
        const Stmt &a = whole_tile(s.refs[0], "reduce source"), &b = whole_tile(s.refs[1], "reduce destination");
        const int64_t axis = s.int_attr("axis", -1);
        check_ok(axis >= 0 && axis < int64_t(a.shape.size()), "reduce: axis ", axis, " is out of range for ", a.name,
                 " ", shape_text(a.shape));
        std::vector<int64_t> want = a.shape;
        want.erase(want.begin() + axis);
        if (want.empty()) want = {1};
        check_ok(b.shape == want, "reduce: ", b.name, " is ", shape_text(b.shape), " but reducing ", a.name, " ",
                 shape_text(a.shape), " along axis ", axis, " gives ", shape_text(want));
        check_ok(!packed(a) && !packed(b), "bad layout: reduce over a packed tile");
        return;
      }
      case Stmt::loop: {
        attrs(s, {"stages", "unroll", "tile"});
        index_expr(s.exprs[0], "a loop bound");
        index_expr(s.exprs[1], "a loop bound");
        check_ok(s.int_attr("stages", 1) >= 1, "stages must be >= 1");
        check_ok(s.int_attr("tile", s.has("tile") ? 0 : 1) >= 1, "tile must be an integer >= 1");
        const int64_t outer_copies = copies_;
        if (s.has("unroll")) copies_ *= unroll_trips(s);
        declare(s.name, "loop variable");
        ints_.insert(s.name);
        body(s.body, false);
        ints_.erase(s.name);
        kinds_.erase(s.name);
        copies_ = outer_copies;
        return;
      }
      case Stmt::parallel: {
        attrs(s, {});
        const Stmt& t = whole_tile(s.refs[0], "parallel domain");
        check_ok(s.vars.size() == t.shape.size(), "parallel over ", t.name, " ", shape_text(t.shape), " needs ",
                 t.shape.size(), " variables, got ", s.vars.size());
        for (const std::string& v : s.vars) {
          declare(v, "loop variable");
          ints_.insert(v);
        }
        body(s.body, true);
        for (const std::string& v : s.vars) {
          ints_.erase(v);
          kinds_.erase(v);
        }
        return;
      }
      case Stmt::assign:
        check_ok(in_parallel, "assignments belong inside parallel");
        element(s.refs[0]);
        value_expr(s.exprs[0]);
        return;
    }
  }

  const Program& p_;
  int line_ = 0;
  int64_t cell_bytes_ = 0;  // tiles declared so far, each rounded to 64 bytes
  int64_t copies_ = 1;      // copies unrolling makes of the statement being checked
  int64_t statements_ = 0;  // statements after unrolling
  std::map<std::string, std::string> kinds_;
  std::set<std::string> dims_, ints_;
  std::map<std::string, const Stmt*> tiles_;
};

}  // namespace

void verify(const Program& p) { Verifier(p).run(); }

}  // namespace sol::tile
