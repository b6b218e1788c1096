#pragma once
// Binding a kernel's parameters to tensors at launch: dtypes, ranks and the values of the
// dynamic dims, shared by the interpreter and compiled kernels.
#include <map>
#include <span>
#include <string>

#include "sol/tensor.h"
#include "sol/tile_ir.h"

namespace sol::tile {

using Env = std::map<std::string, int64_t>;

// Throws sol::Error "kernel K: B.shape[0] = 100 but K = 128 (from A.shape[1])".
Env bind_dims(const Program& p, std::span<const Tensor> args);
// Integer value of an index expression (dims, grid axes, loop variables).
int64_t eval_index(const Expr& e, const Env& env);

}  // namespace sol::tile
