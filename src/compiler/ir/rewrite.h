#pragma once
// Small rewriting helpers the passes share: substitution of a variable with folding of the
// integer arithmetic it leaves behind, and a walk over every statement.
#include <functional>

#include "sol/tile_ir.h"

namespace sol::tile {

// e with every `var` replaced by `by`; integer constants fold (0 * x = 0, x + 0 = x, 2 + 3 = 5).
Expr substitute(const Expr& e, const std::string& var, const Expr& by);
void substitute(Stmt& s, const std::string& var, const Expr& by);
// Folds integer constant arithmetic in e.
Expr fold(const Expr& e);
// Pre-order walk over statements and their bodies.
void walk(std::vector<Stmt>& body, const std::function<void(Stmt&)>& fn);
void walk(const std::vector<Stmt>& body, const std::function<void(const Stmt&)>& fn);

}  // namespace sol::tile
