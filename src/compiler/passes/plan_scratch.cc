// Scratch planning: every tile of a grid cell gets an offset in one per-thread arena. Tiles
// whose lifetimes (first to last use, a use inside a loop counting for the whole loop) do not
// overlap share bytes; offsets are 64-byte aligned (a cache line, and any vector load). The
// arena size becomes the kernel attribute `arena`. A tile marked `reuse` lives for the whole
// kernel.
#include <algorithm>
#include <functional>
#include <map>

#include "compiler/ir/rewrite.h"
#include "compiler/layout.h"
#include "compiler/passes/passes.h"

namespace sol::tile {

namespace {

struct Life {
  int first = -1, last = -1;
};

// Numbers statements in order; a loop's uses all extend to the loop's last statement.
void number(const std::vector<Stmt>& body, int& clock, std::map<std::string, Life>& life) {
  for (const Stmt& s : body) {
    const int start = clock++;
    std::vector<std::string> names;
    if (s.kind == Stmt::alloc) names.push_back(s.name);
    for (const Ref& r : s.refs) names.push_back(r.name);
    std::function<void(const Expr&)> loads = [&](const Expr& e) {
      if (e->kind == ExprNode::load) names.push_back(e->name);
      for (const Expr& a : e->args) loads(a);
    };
    for (const Expr& e : s.exprs) loads(e);
    number(s.body, clock, life);
    walk(s.body, [&](const Stmt& c) {
      for (const Ref& r : c.refs) names.push_back(r.name);
      for (const Expr& e : c.exprs) loads(e);
    });
    for (const std::string& n : names) {
      auto it = life.find(n);
      if (it == life.end()) continue;
      if (it->second.first < 0) it->second.first = start;
      it->second.last = std::max(it->second.last, s.kind == Stmt::loop ? clock : start);
    }
    // A tile used anywhere inside a loop lives for the whole loop.
    if (s.kind == Stmt::loop)
      for (auto& [n, l] : life)
        if (l.last > start && l.first > start) l.first = start;
  }
}

}  // namespace

void plan_scratch(Program& p) {
  std::vector<Stmt*> allocs;
  std::map<std::string, Life> life;
  walk(p.body, [&](Stmt& s) {
    if (s.kind == Stmt::alloc) {
      allocs.push_back(&s);
      life[s.name] = {};
    }
  });
  int clock = 0;
  number(p.body, clock, life);
  struct Placed {
    int64_t offset, bytes;
    Life life;
  };
  std::vector<Placed> placed;
  int64_t arena = 0;
  for (Stmt* a : allocs) {
    const int64_t bytes = (tile_bytes(*a) + 63) / 64 * 64;
    // A reused tile (reuse-tiles) keeps what it holds from one cell to the next.
    const Life l = a->has("reuse") ? Life{0, clock} : life[a->name];
    std::vector<Placed> busy;
    for (const Placed& q : placed)
      if (!(q.life.last < l.first || l.last < q.life.first)) busy.push_back(q);
    std::sort(busy.begin(), busy.end(), [](const Placed& x, const Placed& y) { return x.offset < y.offset; });
    int64_t offset = 0;
    for (const Placed& q : busy)
      if (offset + bytes > q.offset && offset < q.offset + q.bytes) offset = q.offset + q.bytes;
    placed.push_back({offset, bytes, l});
    a->attrs["offset"] = std::to_string(offset);
    arena = std::max(arena, offset + bytes);
  }
  p.attrs["arena"] = std::to_string(arena);
}

}  // namespace sol::tile
