#pragma once
// What the C++ (CPU) and CUDA code generators share: the output text and its indentation, the
// tiles allocated so far, how index and value expressions, element offsets in a row-major tile,
// grid coordinates, serial loops, assignments, fills and tile-to-tile copies are written. Each
// target supplies only its own spellings (runtime namespace, integer literals, min/max of
// indices, float math functions, the loop that shares a tile's elements among its threads) and
// the statements whose code differs (copies from tensors, gemm, reductions, ...).
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sol/tile_ir.h"

namespace sol::tile {

class TileEmitter {
 protected:
  // what: the prefix of errors ("tile codegen"); rt: the namespace of the target's runtime
  // header, which provides ld, st, ceildiv, min_nan and max_nan ("sol_rt", "sol_cuda").
  TileEmitter(const Program& p, std::string what, std::string rt) : p_(p), what_(std::move(what)), rt_(std::move(rt)) {}
  virtual ~TileEmitter() = default;

  // --- target spellings ---
  virtual std::string int_literal(int64_t v) const = 0;
  // min or max (f) of two int64_t index expressions.
  virtual std::string index_min_max(const std::string& f, const std::string& a, const std::string& b) const = 0;
  // The float function f (fmod ceil fabs exp exp2 log sqrt rsqrt ...) applied to args.
  virtual std::string math(const std::string& f, const std::string& args) const = 0;
  // One statement; body() has already set cur_line_ and written its "// line N" comment.
  virtual void stmt(const Stmt& s) = 0;
  // The `for (...)` header of a loop over the n elements of a tile as this target shares them
  // among its threads (the CPU's one thread walks them all; each GPU thread takes every
  // nthreads-th), and the name of the flat element offset inside it.
  virtual std::string element_loop(int64_t n) const = 0;
  virtual std::string element_index() const = 0;

  // --- shared pieces ---
  void line(const std::string& s) { os_ << std::string(size_t(2 * depth_), ' ') << s << '\n'; }
  const Stmt& tile(const std::string& n) const { return *tiles_.at(n); }
  static int64_t numel(const Stmt& t);

  std::string index(const Expr& e) const;
  // Offset of element idx in a row-major tile.
  std::string element(const std::string& name, const std::vector<Expr>& idx) const;
  std::string value(const Expr& e) const;

  // `const int64_t grid_<axis> = extent;` for every grid axis; returns the product of the
  // extents, starting from `one`.
  std::string grid_extents(std::string one);
  // The grid coordinates of the flat cell index `flat`; the first axis varies fastest.
  void grid_coordinates(std::string flat);

  void body(const std::vector<Stmt>& stmts);
  void serial_loop(const Stmt& s);  // Stmt::loop
  void assign(const Stmt& s);       // Stmt::assign
  void fill(const Stmt& s);         // Stmt::fill: every element of a tile set to one value
  // Tile src copied (converted by st) element by element into tile dst of the same numel n.
  void copy_tile_to_tile(const std::string& src, const std::string& dst, int64_t n);

  const Program& p_;
  const std::string what_, rt_;
  std::ostringstream os_;
  int depth_ = 0;
  int cur_line_ = 0;
  std::map<std::string, const Stmt*> tiles_;
};

}  // namespace sol::tile
