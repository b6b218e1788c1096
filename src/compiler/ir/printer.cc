// The canonical text form of a tile program: minimal parentheses, attributes sorted by key,
// two spaces of indent per block. The parser reads exactly this back.
#include <charconv>
#include <cmath>
#include <sstream>

#include "sol/tile_ir.h"

namespace sol::tile {

namespace {

int precedence(const std::string& op) {
  if (op == "<" || op == "<=" || op == "==") return 1;
  if (op == "+" || op == "-") return 2;
  return 3;  // * / %
}

int precedence(const Expr& e) {
  if (e->kind == ExprNode::binary) return precedence(e->name);
  if ((e->kind == ExprNode::integer && e->ivalue < 0) || (e->kind == ExprNode::real && std::signbit(e->fvalue)))
    return 3;  // a leading minus binds like a product: "a - -1" needs no parentheses, "-1 * a" neither
  return 4;
}

std::string real_text(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void print_expr(std::ostream& os, const Expr& e) {
  switch (e->kind) {
    case ExprNode::integer: os << e->ivalue; return;
    case ExprNode::real: os << real_text(e->fvalue); return;
    case ExprNode::var: os << e->name; return;
    case ExprNode::binary: {
      // Operators associate to the left, so the right operand is wrapped at equal precedence;
      // comparisons do not chain at all (`a < b < c` does not parse), so both sides are.
      const int p = precedence(e->name);
      const bool chains = p != precedence("<");
      const bool wrap_a = chains ? precedence(e->args[0]) < p : precedence(e->args[0]) <= p;
      const bool wrap_b = precedence(e->args[1]) <= p;
      if (wrap_a) os << '(';
      print_expr(os, e->args[0]);
      if (wrap_a) os << ')';
      os << ' ' << e->name << ' ';
      if (wrap_b) os << '(';
      print_expr(os, e->args[1]);
      if (wrap_b) os << ')';
      return;
    }
    case ExprNode::call:
    case ExprNode::load: {
      os << e->name << (e->kind == ExprNode::call ? '(' : '[');
      for (size_t i = 0; i < e->args.size(); ++i) {
        if (i) os << ", ";
        print_expr(os, e->args[i]);
      }
      os << (e->kind == ExprNode::call ? ')' : ']');
      return;
    }
  }
}

void print_ref(std::ostream& os, const Ref& r) {
  os << r.name;
  if (r.index.empty()) return;
  os << '[';
  for (size_t i = 0; i < r.index.size(); ++i) {
    if (i) os << ", ";
    print_expr(os, r.index[i]);
  }
  os << ']';
}

void print_attrs(std::ostream& os, const std::map<std::string, std::string>& attrs) {
  for (const auto& [k, v] : attrs) {
    os << ' ' << k;
    if (!v.empty()) os << '=' << v;
  }
}

void print_body(std::ostream& os, const std::vector<Stmt>& body, int indent);

void print_stmt(std::ostream& os, const Stmt& s, int indent) {
  const std::string pad(size_t(2 * indent), ' ');
  os << pad;
  switch (s.kind) {
    case Stmt::alloc:
      os << "alloc " << s.name << ": " << scope_name(s.scope) << ' ' << dtype_name(s.dtype) << '[';
      for (size_t i = 0; i < s.shape.size(); ++i) os << (i ? ", " : "") << s.shape[i];
      os << ']';
      break;
    case Stmt::fill:
      os << "fill ";
      print_ref(os, s.refs[0]);
      os << ", ";
      print_expr(os, s.exprs[0]);
      break;
    case Stmt::copy:
    case Stmt::cast:
    case Stmt::prefetch:
      os << (s.kind == Stmt::copy ? "copy " : s.kind == Stmt::cast ? "cast " : "prefetch ");
      print_ref(os, s.refs[0]);
      os << " -> ";
      print_ref(os, s.refs[1]);
      break;
    case Stmt::gemm:
    case Stmt::ukernel:
      os << (s.kind == Stmt::gemm ? "gemm " : "ukernel ");
      print_ref(os, s.refs[0]);
      os << ", ";
      print_ref(os, s.refs[1]);
      os << " -> ";
      print_ref(os, s.refs[2]);
      break;
    case Stmt::reduce:
      os << "reduce " << s.name << ' ';
      print_ref(os, s.refs[0]);
      os << " -> ";
      print_ref(os, s.refs[1]);
      break;
    case Stmt::loop:
      os << "for " << s.name << " in ";
      print_expr(os, s.exprs[0]);
      os << " .. ";
      print_expr(os, s.exprs[1]);
      break;
    case Stmt::parallel:
      os << "parallel ";
      for (size_t i = 0; i < s.vars.size(); ++i) os << (i ? ", " : "") << s.vars[i];
      os << " in ";
      print_ref(os, s.refs[0]);
      break;
    case Stmt::assign:
      print_ref(os, s.refs[0]);
      os << " = ";
      print_expr(os, s.exprs[0]);
      break;
  }
  print_attrs(os, s.attrs);
  if (s.kind == Stmt::loop || s.kind == Stmt::parallel) {
    os << " {\n";
    print_body(os, s.body, indent + 1);
    os << pad << '}';
  }
  os << '\n';
}

void print_body(std::ostream& os, const std::vector<Stmt>& body, int indent) {
  for (const Stmt& s : body) print_stmt(os, s, indent);
}

}  // namespace

std::string print(const Expr& e) {
  std::ostringstream os;
  print_expr(os, e);
  return os.str();
}

std::string print(const Program& p) {
  std::ostringstream os;
  os << "kernel " << p.name << '(';
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& q = p.params[i];
    os << (i ? ", " : "") << q.name << ": " << dtype_name(q.dtype) << '[';
    for (size_t d = 0; d < q.shape.size(); ++d) {
      if (d) os << ", ";
      print_expr(os, q.shape[d]);
    }
    os << ']';
  }
  os << ") grid(";
  for (size_t i = 0; i < p.grid.size(); ++i) {
    os << (i ? ", " : "") << p.grid[i].name << " = ";
    print_expr(os, p.grid[i].extent);
  }
  os << ')';
  print_attrs(os, p.attrs);
  os << " {\n";
  print_body(os, p.body, 1);
  os << "}\n";
  return os.str();
}

}  // namespace sol::tile
