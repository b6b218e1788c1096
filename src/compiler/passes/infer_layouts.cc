// Layout inference: a tile the gemm reads as A is stored as the micro-kernel's A panels
// (packed_a, or packed_at when transposed), one read as B as B panels (packed_b/packed_bt);
// every other tile is row-major. The copy that fills a packed tile then packs it (the layout
// change happens once, in the copy, not in the inner loop). A tile wanted in two layouts, or
// a layout that contradicts one written by hand, is an error naming both lines. A bf16 A tile
// is `widened` (its values as f32, compiler/layout.h) where the target's tile kernels multiply
// bf16 by f32 FMAs: the tile kernel then broadcasts A from memory instead of widening it.
#include <map>

#include "compiler/ir/rewrite.h"
#include "compiler/passes/passes.h"
#include "sol/error.h"

namespace sol::tile {

void infer_layouts(Program& p, const CpuTarget& cpu) {
  std::map<std::string, std::pair<std::string, int>> wanted;  // tile -> (layout, line)
  auto want = [&](const std::string& tile, const std::string& layout, int line) {
    auto [it, fresh] = wanted.try_emplace(tile, layout, line);
    if (!fresh && it->second.first != layout)
      fail("kernel " + p.name + ", line " + std::to_string(line), "bad layout: ", tile, " is used as ", layout,
           " here but as ", it->second.first, " at line ", it->second.second);
  };
  walk(p.body, [&](const Stmt& s) {
    if (s.kind != Stmt::gemm) return;
    want(s.refs[0].name, s.has("trans_a") ? "packed_at" : "packed_a", s.line);
    want(s.refs[1].name, s.has("trans_b") ? "packed_bt" : "packed_b", s.line);
    want(s.refs[2].name, "row", s.line);
  });
  walk(p.body, [&](Stmt& s) {
    if (s.kind != Stmt::alloc) return;
    auto it = wanted.find(s.name);
    const std::string layout = it == wanted.end() ? "row" : it->second.first;
    if (s.has("layout") && s.attrs.at("layout") != layout)
      fail("kernel " + p.name + ", line " + std::to_string(s.line), "bad layout: ", s.name, " is declared ",
           s.attrs.at("layout"), " but the gemm at line ", it == wanted.end() ? s.line : it->second.second,
           " needs ", layout);
    s.attrs["layout"] = layout;
    const bool a_panel = layout == "packed_a" || layout == "packed_at";
    if (a_panel && s.dtype == DType::bf16 && cpu.widen_bf16_a) s.attrs["widened"] = "";
    else s.attrs.erase("widened");
  });
}

}  // namespace sol::tile
