#pragma once
// The tile IR: a kernel is a grid of independent cells (mapped onto threads), each running a
// structured body of tile statements. One data structure serves every stage: the builder and
// the parser produce it, passes rewrite it (lowered statements such as `ukernel` and `prefetch`
// live beside the tile-level ones), the interpreter and the code generators consume it.
// Every statement carries the line it came from, so every error can name it.
//
// Textual form (docs/compiler.md has the grammar):
//   kernel scale(X: f32[N], Y: f32[N]) grid(bx = ceildiv(N, 64)) {
//     alloc t: fragment f32[64]
//     copy X[bx * 64] -> t
//     parallel i in t {
//       t[i] = t[i] * 2.0
//     }
//     copy t -> Y[bx * 64]
//   }
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sol/dtype.h"

namespace sol::tile {

// Expressions: integers (indices, dims, loop bounds) and floats (element values) share one tree.
struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  enum Kind { integer, real, var, binary, call, load } kind = integer;
  int64_t ivalue = 0;   // integer
  double fvalue = 0;    // real
  std::string name;     // var: its name; binary: "+ - * / % < <= == max"; call: function; load: tile
  std::vector<Expr> args;
};

Expr make_int(int64_t v);
Expr make_real(double v);
Expr make_var(std::string name);
Expr make_binary(std::string op, Expr a, Expr b);
Expr make_call(std::string fn, std::vector<Expr> args);
Expr make_load(std::string tile, std::vector<Expr> index);

// Functions an expression may call, with their arity. ceildiv is an index function; the rest
// compute on f32 values.
int call_arity(const std::string& fn);  // -1 when unknown

// A tensor or tile operand: its name and, optionally, the offsets of a region (one per dim of
// the tensor; the region's extent is the shape of the tile on the other side).
struct Ref {
  std::string name;
  std::vector<Expr> index;
};

enum class Scope { fragment, scratch };
std::string_view scope_name(Scope s);

struct Stmt {
  enum Kind {
    alloc,     // name: scope dtype[shape]
    fill,      // refs[0] = exprs[0] everywhere
    copy,      // refs[0] -> refs[1], tensor <-> tile, converting dtype and layout
    cast,      // tile refs[0] -> tile refs[1] of another dtype
    gemm,      // refs[2] (+)= op(refs[0]) * op(refs[1])      attrs: trans_a trans_b clear
    reduce,    // name = sum|max; refs[0] -> refs[1] along attrs["axis"]   attrs: clear
    loop,      // for name in exprs[0] .. exprs[1] { body }   attrs: stages=N unroll
    parallel,  // parallel vars in refs[0] { body }: element-wise over refs[0]'s shape
    assign,    // refs[0] = exprs[0] (inside parallel)
    prefetch,  // refs[0] -> refs[1]: the region a copy into refs[1] would read (lowered)
    ukernel,   // one register tile: refs[2] (+)= refs[0] panel x refs[1] panel (lowered gemm)
  } kind = fill;
  int line = 0;
  std::string name;
  Scope scope = Scope::fragment;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<std::string> vars;
  std::vector<Ref> refs;
  std::vector<Expr> exprs;
  std::map<std::string, std::string> attrs;  // "" = a bare flag
  std::vector<Stmt> body;

  bool has(const std::string& key) const { return attrs.count(key) != 0; }
  int64_t int_attr(const std::string& key, int64_t fallback) const;
};

struct Param {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Expr> shape;  // integers or dim names (bound from the tensors at launch)
};

struct GridAxis {
  std::string name;
  Expr extent;
};

struct Program {
  std::string name;
  int line = 0;
  std::vector<Param> params;
  std::vector<GridAxis> grid;
  std::map<std::string, std::string> attrs;  // set by passes, e.g. arena=BYTES
  std::vector<Stmt> body;

  const Param* param(const std::string& n) const;
  const Stmt* alloc(const std::string& n) const;  // searches the whole body
  std::vector<std::string> dims() const;          // dim names in order of first appearance
};

// Text form: print(parse(text)) == text for printed programs.
std::string print(const Program& p);
std::string print(const Expr& e);
// Throws sol::Error "FILE:LINE: ..." on a syntax error.
Program parse(const std::string& text, const std::string& file = "<program>");

}  // namespace sol::tile
