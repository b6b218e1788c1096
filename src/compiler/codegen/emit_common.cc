// Code shared by the C++ and CUDA emitters (emit_common.h).
#include "compiler/codegen/emit_common.h"

#include <cmath>

#include "sol/error.h"

namespace sol::tile {

int64_t TileEmitter::numel(const Stmt& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

std::string TileEmitter::index(const Expr& e) const {
  switch (e->kind) {
    case ExprNode::integer: return int_literal(e->ivalue);
    case ExprNode::var: return e->name;
    case ExprNode::binary: {
      const std::string a = index(e->args[0]), b = index(e->args[1]);
      return "(" + a + " " + e->name + " " + b + ")";
    }
    case ExprNode::call: {
      const std::string a = index(e->args[0]), b = index(e->args[1]);
      if (e->name == "ceildiv") return rt_ + "::ceildiv(" + a + ", " + b + ")";
      return index_min_max(e->name, a, b);
    }
    default: fail(what_, "line ", cur_line_, ": not an index expression: ", print(e));
  }
}

std::string TileEmitter::element(const std::string& name, const std::vector<Expr>& idx) const {
  const Stmt& t = tile(name);
  std::string off = index(idx[0]);
  for (size_t d = 1; d < idx.size(); ++d) off = "(" + off + ") * " + std::to_string(t.shape[d]) + " + " + index(idx[d]);
  return off;
}

std::string TileEmitter::value(const Expr& e) const {
  switch (e->kind) {
    case ExprNode::integer: return std::to_string(e->ivalue) + ".0f";
    case ExprNode::real: {
      if (std::isinf(e->fvalue)) return e->fvalue < 0 ? "(-INFINITY)" : "INFINITY";
      std::ostringstream os;
      os.precision(9);
      os << "float(" << e->fvalue << ")";
      return os.str();
    }
    case ExprNode::var: return "float(" + e->name + ")";
    case ExprNode::load: return rt_ + "::ld(" + e->name + ", " + element(e->name, e->args) + ")";
    case ExprNode::binary: {
      const std::string a = value(e->args[0]), b = value(e->args[1]);
      if (e->name == "%") return math("fmod", a + ", " + b);
      if (e->name == "<" || e->name == "<=" || e->name == "==") return "float(" + a + " " + e->name + " " + b + ")";
      return "(" + a + " " + e->name + " " + b + ")";
    }
    case ExprNode::call: {
      std::vector<std::string> a;
      for (const Expr& x : e->args) a.push_back(value(x));
      const std::string& f = e->name;
      if (f == "select") return "(" + a[0] + " != 0.0f ? " + a[1] + " : " + a[2] + ")";
      if (f == "max" || f == "min") return rt_ + "::" + f + "_nan(" + a[0] + ", " + a[1] + ")";
      if (f == "ceildiv") return math("ceil", a[0] + " / " + a[1]);
      if (f == "float") return a[0];
      return math(f == "abs" ? std::string("fabs") : f, a[0]);
    }
  }
  fail(what_, "line ", cur_line_, ": unknown expression kind");
}

std::string TileEmitter::grid_extents(std::string one) {
  for (const GridAxis& a : p_.grid) {
    line("const int64_t grid_" + a.name + " = " + index(a.extent) + ";");
    one += " * grid_" + a.name;
  }
  return one;
}

void TileEmitter::grid_coordinates(std::string flat) {
  for (const GridAxis& a : p_.grid) {
    line("const int64_t " + a.name + " = " + flat + " % grid_" + a.name + ";");
    flat = "(" + flat + " / grid_" + a.name + ")";
  }
}

void TileEmitter::body(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts) {
    cur_line_ = s.line;
    if (s.kind != Stmt::assign) line("// line " + std::to_string(s.line));
    stmt(s);
  }
}

void TileEmitter::serial_loop(const Stmt& s) {
  line("for (int64_t " + s.name + " = " + index(s.exprs[0]) + "; " + s.name + " < " + index(s.exprs[1]) + "; ++" +
       s.name + ") {");
  ++depth_;
  body(s.body);
  --depth_;
  line("}");
}

void TileEmitter::assign(const Stmt& s) {
  line(rt_ + "::st(" + s.refs[0].name + ", " + element(s.refs[0].name, s.refs[0].index) + ", " + value(s.exprs[0]) +
       ");");
}

void TileEmitter::fill(const Stmt& s) {
  const Stmt& t = tile(s.refs[0].name);
  line("{");
  ++depth_;
  line("const float v = " + value(s.exprs[0]) + ";");
  line(element_loop(numel(t)) + " " + rt_ + "::st(" + t.name + ", " + element_index() + ", v);");
  --depth_;
  line("}");
}

void TileEmitter::copy_tile_to_tile(const std::string& src, const std::string& dst, int64_t n) {
  const std::string i = element_index();
  line(element_loop(n) + " " + rt_ + "::st(" + dst + ", " + i + ", " + rt_ + "::ld(" + src + ", " + i + "));");
}

}  // namespace sol::tile
