#pragma once
// Name mangling shared by the code generators (C++ and CUDA).
#include <map>
#include <string>

#include "sol/tile_ir.h"

namespace sol::tile {

// Program names get a prefix in C++ (tensors x_, tiles t_, dims and variables v_), so no
// user name can collide with the generated code's own locals or with C++ keywords.
class Mangler {
 public:
  explicit Mangler(const Program& p) {
    for (const Param& q : p.params) kind_[q.name] = "x_";
    walk_names(p.body);
  }
  std::string operator()(const std::string& n) const {
    auto it = kind_.find(n);
    return (it == kind_.end() ? "v_" : it->second) + n;
  }
  Expr expr(const Expr& e) const {
    if (e->kind == ExprNode::var) return make_var((*this)(e->name));
    if (e->args.empty()) return e;
    std::vector<Expr> args;
    for (const Expr& a : e->args) args.push_back(expr(a));
    if (e->kind == ExprNode::binary) return make_binary(e->name, args[0], args[1]);
    if (e->kind == ExprNode::call) return make_call(e->name, std::move(args));
    return make_load((*this)(e->name), std::move(args));
  }
  void stmts(std::vector<Stmt>& body) const {
    for (Stmt& s : body) {
      if (s.kind == Stmt::alloc || s.kind == Stmt::loop) s.name = (*this)(s.name);
      for (std::string& v : s.vars) v = (*this)(v);
      for (Ref& r : s.refs) {
        r.name = (*this)(r.name);
        for (Expr& e : r.index) e = expr(e);
      }
      for (Expr& e : s.exprs) e = expr(e);
      stmts(s.body);
    }
  }
  Program program(Program p) const {
    for (Param& q : p.params) {
      q.name = (*this)(q.name);
      for (Expr& d : q.shape) d = expr(d);
    }
    for (GridAxis& a : p.grid) {
      a.name = (*this)(a.name);
      a.extent = expr(a.extent);
    }
    stmts(p.body);
    return p;
  }

 private:
  void walk_names(const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (s.kind == Stmt::alloc) kind_[s.name] = "t_";
      walk_names(s.body);
    }
  }
  std::map<std::string, std::string> kind_;
};

}  // namespace sol::tile
