// Tile reuse across cells: a copy from a tensor into a tile that nothing else writes, from a
// tensor the kernel never writes, is marked `reuse` (and its tile too). The generated code then
// remembers which region the tile holds and skips a copy of the same region: consecutive cells
// of one thread that read the same block (a GEMM whose grid runs down M first, with K in one
// tile, packs each B block once instead of once per cell, as the hand-written driver packs
// each (NC, KC) block of B once for every MC block of A). A reused tile keeps its bytes for
// the whole kernel (plan-scratch gives it no sharer), since it outlives the cell.
#include <map>
#include <set>

#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"

namespace sol::tile {

namespace {

// Every tile or tensor a statement writes.
void written_by(const Stmt& s, std::map<std::string, int>& writes) {
  switch (s.kind) {
    case Stmt::fill:
    case Stmt::parallel: ++writes[s.refs[0].name]; return;
    case Stmt::copy:
    case Stmt::cast:
    case Stmt::reduce: ++writes[s.refs[1].name]; return;
    case Stmt::gemm:
    case Stmt::ukernel: ++writes[s.refs[2].name]; return;
    case Stmt::assign: ++writes[s.refs[0].name]; return;
    default: return;
  }
}

}  // namespace

void reuse_tiles(Program& p) {
  // Decided here alone: a `reuse` written into the program text by hand is not trusted.
  walk(p.body, [](Stmt& s) { s.attrs.erase("reuse"); });
  std::map<std::string, int> writes;
  walk(p.body, [&](const Stmt& s) { written_by(s, writes); });
  std::set<std::string> reused;
  walk(p.body, [&](Stmt& s) {
    if (s.kind != Stmt::copy || !p.param(s.refs[0].name) || p.param(s.refs[1].name)) return;
    if (writes[s.refs[1].name] != 1 || writes.count(s.refs[0].name)) return;
    s.attrs["reuse"] = "";
    reused.insert(s.refs[1].name);
  });
  walk(p.body, [&](Stmt& s) {
    if (s.kind == Stmt::alloc && reused.count(s.name)) s.attrs["reuse"] = "";
  });
}

}  // namespace sol::tile
