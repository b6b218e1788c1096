// Constructors and lookups of the tile IR (sol/tile_ir.h).
#include <functional>
#include <set>

#include "compiler/ir/text_limits.h"
#include "sol/error.h"
#include "sol/tile_ir.h"

namespace sol::tile {

namespace {
Expr node(ExprNode n) { return std::make_shared<const ExprNode>(std::move(n)); }
}  // namespace

Expr make_int(int64_t v) { return node({ExprNode::integer, v, 0, {}, {}}); }
Expr make_real(double v) { return node({ExprNode::real, 0, v, {}, {}}); }
Expr make_var(std::string name) { return node({ExprNode::var, 0, 0, std::move(name), {}}); }
Expr make_binary(std::string op, Expr a, Expr b) {
  return node({ExprNode::binary, 0, 0, std::move(op), {std::move(a), std::move(b)}});
}
Expr make_call(std::string fn, std::vector<Expr> args) {
  return node({ExprNode::call, 0, 0, std::move(fn), std::move(args)});
}
Expr make_load(std::string tile, std::vector<Expr> index) {
  return node({ExprNode::load, 0, 0, std::move(tile), std::move(index)});
}

int call_arity(const std::string& fn) {
  static const std::map<std::string, int> arity = {
      {"exp2", 1}, {"exp", 1},  {"log", 1},    {"rsqrt", 1},   {"sqrt", 1},  {"abs", 1},
      {"max", 2},  {"min", 2},  {"select", 3}, {"ceildiv", 2}, {"float", 1}};
  auto it = arity.find(fn);
  return it == arity.end() ? -1 : it->second;
}

std::string_view scope_name(Scope s) { return s == Scope::fragment ? "fragment" : "scratch"; }

int64_t Stmt::int_attr(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end() || it->second.empty()) return fallback;
  int64_t value = 0;
  if (!parse_whole_int(it->second, value))
    fail("line " + std::to_string(line), "attribute ", key, " = '", escaped(it->second),
         "' is not an integer that fits 64 bits");
  return value;
}

const Param* Program::param(const std::string& n) const {
  for (const Param& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const Stmt* Program::alloc(const std::string& n) const {
  std::function<const Stmt*(const std::vector<Stmt>&)> find = [&](const std::vector<Stmt>& body) -> const Stmt* {
    for (const Stmt& s : body) {
      if (s.kind == Stmt::alloc && s.name == n) return &s;
      if (const Stmt* r = find(s.body)) return r;
    }
    return nullptr;
  };
  return find(body);
}

std::vector<std::string> Program::dims() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Param& p : params)
    for (const Expr& d : p.shape)
      if (d->kind == ExprNode::var && seen.insert(d->name).second) out.push_back(d->name);
  return out;
}

}  // namespace sol::tile
