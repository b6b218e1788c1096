#pragma once
// sol::Error — the one exception type Sol throws for bad input or an unusable machine.
// Messages name the op, the argument, what was expected and what was got:
//   gemm: a.shape[1] = 96 but b.shape[0] = 128
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sol {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds "op: part part part..." from any streamable parts and throws it.
template <class... Parts>
[[noreturn]] void fail(std::string_view op, Parts&&... parts) {
  std::ostringstream os;
  os << op << ": ";
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

template <class... Parts>
void check(bool ok, std::string_view op, Parts&&... parts) {
  if (!ok) fail(op, std::forward<Parts>(parts)...);
}

}  // namespace sol
