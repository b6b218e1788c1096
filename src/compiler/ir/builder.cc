// The C++ builder of tile programs (sol/tile.h): each call appends one statement, stamped with
// the caller's source line, to the innermost open block.
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {

namespace {
Value bin(const char* op, const Value& a, const Value& b) { return make_binary(op, a.expr(), b.expr()); }
Value call(const char* fn, std::vector<Value> args) {
  std::vector<Expr> e;
  for (const Value& v : args) e.push_back(v.expr());
  return make_call(fn, std::move(e));
}
}  // namespace

Value operator+(const Value& a, const Value& b) { return bin("+", a, b); }
Value operator-(const Value& a, const Value& b) { return bin("-", a, b); }
Value operator*(const Value& a, const Value& b) { return bin("*", a, b); }
Value operator/(const Value& a, const Value& b) { return bin("/", a, b); }
Value operator%(const Value& a, const Value& b) { return bin("%", a, b); }
Value operator<(const Value& a, const Value& b) { return bin("<", a, b); }
Value operator<=(const Value& a, const Value& b) { return bin("<=", a, b); }
Value ceildiv(const Value& a, const Value& b) { return call("ceildiv", {a, b}); }
Value max(const Value& a, const Value& b) { return call("max", {a, b}); }
Value min(const Value& a, const Value& b) { return call("min", {a, b}); }
Value select(const Value& c, const Value& a, const Value& b) { return call("select", {c, a, b}); }
Value exp2(const Value& a) { return call("exp2", {a}); }
Value exp(const Value& a) { return call("exp", {a}); }
Value log(const Value& a) { return call("log", {a}); }
Value rsqrt(const Value& a) { return call("rsqrt", {a}); }
Value sqrt(const Value& a) { return call("sqrt", {a}); }
Value abs(const Value& a) { return call("abs", {a}); }
Value to_float(const Value& a) { return call("float", {a}); }

Region::Region(std::string name, std::vector<Value> index) {
  ref_.name = std::move(name);
  for (const Value& v : index) ref_.index.push_back(v.expr());
}

Builder::Builder(std::string kernel_name, Loc loc) {
  p_.name = std::move(kernel_name);
  p_.line = int(loc.line());
  open_.push_back(&p_.body);
}

Value Builder::dim(const std::string& name) { return make_var(name); }

Handle Builder::tensor(const std::string& name, DType dtype, std::vector<Value> shape) {
  Param q{name, dtype, {}};
  for (const Value& v : shape) q.shape.push_back(v.expr());
  p_.params.push_back(std::move(q));
  return {name};
}

std::vector<Value> Builder::grid(std::vector<std::pair<std::string, Value>> axes) {
  std::vector<Value> vars;
  for (auto& [name, extent] : axes) {
    p_.grid.push_back({name, extent.expr()});
    vars.push_back(make_var(name));
  }
  return vars;
}

Stmt& Builder::add(Stmt s, Loc loc) {
  s.line = int(loc.line());
  open_.back()->push_back(std::move(s));
  return open_.back()->back();
}

Handle Builder::fragment(const std::string& name, DType dtype, std::vector<int64_t> shape, Loc loc) {
  Stmt s;
  s.kind = Stmt::alloc;
  s.name = name;
  s.scope = Scope::fragment;
  s.dtype = dtype;
  s.shape = std::move(shape);
  add(std::move(s), loc);
  return {name};
}

Handle Builder::scratch(const std::string& name, DType dtype, std::vector<int64_t> shape, Loc loc) {
  Handle h = fragment(name, dtype, std::move(shape), loc);
  open_.back()->back().scope = Scope::scratch;
  return h;
}

void Builder::fill(const Region& dst, const Value& v, Loc loc) {
  Stmt s;
  s.kind = Stmt::fill;
  s.refs = {dst.ref()};
  s.exprs = {v.expr()};
  add(std::move(s), loc);
}

void Builder::copy(const Region& src, const Region& dst, Loc loc) {
  Stmt s;
  s.kind = Stmt::copy;
  s.refs = {src.ref(), dst.ref()};
  add(std::move(s), loc);
}

void Builder::cast(const Region& src, const Region& dst, Loc loc) {
  Stmt s;
  s.kind = Stmt::cast;
  s.refs = {src.ref(), dst.ref()};
  add(std::move(s), loc);
}

void Builder::gemm(const Region& a, const Region& b, const Region& c, GemmFlags f, Loc loc) {
  Stmt s;
  s.kind = Stmt::gemm;
  s.refs = {a.ref(), b.ref(), c.ref()};
  if (f.trans_a) s.attrs["trans_a"] = "";
  if (f.trans_b) s.attrs["trans_b"] = "";
  if (f.clear) s.attrs["clear"] = "";
  add(std::move(s), loc);
}

void Builder::reduce(const char* kind, const Region& src, const Region& dst, int axis, bool clear, Loc loc) {
  Stmt s;
  s.kind = Stmt::reduce;
  s.name = kind;
  s.refs = {src.ref(), dst.ref()};
  s.attrs["axis"] = std::to_string(axis);
  if (clear) s.attrs["clear"] = "";
  add(std::move(s), loc);
}
void Builder::reduce_sum(const Region& src, const Region& dst, int axis, bool clear, Loc loc) {
  reduce("sum", src, dst, axis, clear, loc);
}
void Builder::reduce_max(const Region& src, const Region& dst, int axis, bool clear, Loc loc) {
  reduce("max", src, dst, axis, clear, loc);
}

void Builder::for_range(const std::string& var, const Value& lo, const Value& hi,
                        const std::function<void(Value)>& body, LoopOptions opt, Loc loc) {
  Stmt s;
  s.kind = Stmt::loop;
  s.name = var;
  s.exprs = {lo.expr(), hi.expr()};
  if (opt.stages > 1) s.attrs["stages"] = std::to_string(opt.stages);
  if (opt.unroll) s.attrs["unroll"] = "";
  Stmt& added = add(std::move(s), loc);
  open_.push_back(&added.body);
  body(make_var(var));
  open_.pop_back();
}

void Builder::parallel(std::vector<std::string> vars, const Handle& over,
                       const std::function<void(const std::vector<Value>&)>& body, Loc loc) {
  Stmt s;
  s.kind = Stmt::parallel;
  s.vars = vars;
  s.refs = {Ref{over.name, {}}};
  Stmt& added = add(std::move(s), loc);
  open_.push_back(&added.body);
  std::vector<Value> v;
  for (const std::string& n : vars) v.push_back(make_var(n));
  body(v);
  open_.pop_back();
}

void Builder::assign(const Region& dst, const Value& v, Loc loc) {
  Stmt s;
  s.kind = Stmt::assign;
  s.refs = {dst.ref()};
  s.exprs = {v.expr()};
  add(std::move(s), loc);
}

Program Builder::finish() {
  check(open_.size() == 1, "tile builder", "finish() inside an open loop");
  return p_;
}

}  // namespace sol::tile
