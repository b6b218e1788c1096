// Rewriting helpers (rewrite.h).
#include "compiler/ir/rewrite.h"

namespace sol::tile {

Expr fold(const Expr& e) {
  if (e->kind != ExprNode::binary && e->kind != ExprNode::call && e->kind != ExprNode::load) return e;
  std::vector<Expr> args;
  for (const Expr& a : e->args) args.push_back(fold(a));
  if (e->kind == ExprNode::load) return make_load(e->name, std::move(args));
  if (e->kind == ExprNode::call) return make_call(e->name, std::move(args));
  const Expr &a = args[0], &b = args[1];
  const bool ia = a->kind == ExprNode::integer, ib = b->kind == ExprNode::integer;
  const std::string& o = e->name;
  if (ia && ib) {
    // A result that does not fit 64 bits stays unfolded (as written) rather than wrapping.
    const int64_t x = a->ivalue, y = b->ivalue;
    int64_t r = 0;
    if (o == "+" && !__builtin_add_overflow(x, y, &r)) return make_int(r);
    if (o == "-" && !__builtin_sub_overflow(x, y, &r)) return make_int(r);
    if (o == "*" && !__builtin_mul_overflow(x, y, &r)) return make_int(r);
  }
  if (o == "*" && ((ia && a->ivalue == 0) || (ib && b->ivalue == 0))) return make_int(0);
  if (o == "*" && ia && a->ivalue == 1) return b;
  if ((o == "*" || o == "/") && ib && b->ivalue == 1) return a;
  if (o == "+" && ia && a->ivalue == 0) return b;
  if ((o == "+" || o == "-") && ib && b->ivalue == 0) return a;
  return make_binary(o, a, b);
}

Expr substitute(const Expr& e, const std::string& var, const Expr& by) {
  if (e->kind == ExprNode::var) return e->name == var ? by : e;
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  for (const Expr& a : e->args) args.push_back(substitute(a, var, by));
  if (e->kind == ExprNode::binary) return fold(make_binary(e->name, args[0], args[1]));
  return e->kind == ExprNode::call ? make_call(e->name, std::move(args)) : make_load(e->name, std::move(args));
}

void substitute(Stmt& s, const std::string& var, const Expr& by) {
  for (Ref& r : s.refs)
    for (Expr& e : r.index) e = substitute(e, var, by);
  for (Expr& e : s.exprs) e = substitute(e, var, by);
  for (Stmt& c : s.body) substitute(c, var, by);
}

void walk(std::vector<Stmt>& body, const std::function<void(Stmt&)>& fn) {
  for (Stmt& s : body) {
    fn(s);
    walk(s.body, fn);
  }
}

void walk(const std::vector<Stmt>& body, const std::function<void(const Stmt&)>& fn) {
  for (const Stmt& s : body) {
    fn(s);
    walk(s.body, fn);
  }
}

}  // namespace sol::tile
