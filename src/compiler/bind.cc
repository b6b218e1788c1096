// Parameter binding and index arithmetic (bind.h).
#include "compiler/bind.h"

#include <algorithm>
#include <cstdint>

#include "sol/error.h"

namespace sol::tile {

Env bind_dims(const Program& p, std::span<const Tensor> args) {
  const std::string op = "kernel " + p.name;
  check(args.size() == p.params.size(), op, "takes ", p.params.size(), " tensors, got ", args.size());
  Env env;
  std::map<std::string, std::string> from;
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& q = p.params[i];
    const Tensor& t = args[i];
    check(t.dtype() == q.dtype, op, q.name, " is ", dtype_name(t.dtype()), " but must be ", dtype_name(q.dtype));
    check(t.ndim() == int(q.shape.size()), op, q.name, " has ", t.ndim(), " dims but must have ", q.shape.size());
    check(t.empty() || t.stride(-1) == 1, op, q.name, " must have unit stride in its last dim");
    for (int d = 0; d < t.ndim(); ++d) {
      const Expr& want = q.shape[size_t(d)];
      const std::string here = q.name + ".shape[" + std::to_string(d) + "]";
      if (want->kind == ExprNode::integer) {
        check(t.shape(d) == want->ivalue, op, here, " = ", t.shape(d), " but must be ", want->ivalue);
      } else if (auto it = env.find(want->name); it != env.end()) {
        check(t.shape(d) == it->second, op, here, " = ", t.shape(d), " but ", want->name, " = ", it->second,
              " (from ", from[want->name], ")");
      } else {
        env[want->name] = t.shape(d);
        from[want->name] = here;
      }
    }
  }
  return env;
}

int64_t eval_index(const Expr& e, const Env& env) {
  switch (e->kind) {
    case ExprNode::integer: return e->ivalue;
    case ExprNode::var: {
      auto it = env.find(e->name);
      check(it != env.end(), "tile", "unbound name '", e->name, "'");
      return it->second;
    }
    case ExprNode::binary: {
      const int64_t a = eval_index(e->args[0], env), b = eval_index(e->args[1], env);
      const std::string& o = e->name;
      int64_t r = 0;
      const bool overflow = o == "+"   ? __builtin_add_overflow(a, b, &r)
                            : o == "-" ? __builtin_sub_overflow(a, b, &r)
                            : o == "*" ? __builtin_mul_overflow(a, b, &r)
                                       : b == -1 && a == INT64_MIN;
      check(!overflow, "tile", "index arithmetic overflows 64 bits in ", print(e), " (", a, " ", o, " ", b, ")");
      if (o == "+" || o == "-" || o == "*") return r;
      check(b != 0, "tile", "division by zero in ", print(e));
      return o == "/" ? a / b : a % b;
    }
    case ExprNode::call: {
      const int64_t a = eval_index(e->args[0], env), b = eval_index(e->args[1], env);
      if (e->name == "min") return std::min(a, b);
      if (e->name == "max") return std::max(a, b);
      check(b > 0, "tile", "ceildiv by ", b, " in ", print(e));
      // (a + b - 1) / b; near INT64_MAX the same value (a > 0 there) without the overflow.
      return a > INT64_MAX - (b - 1) ? a / b + (a % b > 0 ? 1 : 0) : (a + b - 1) / b;
    }
    default: fail("tile", "not an integer expression: ", print(e));
  }
}

}  // namespace sol::tile
