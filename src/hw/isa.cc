// ISA levels: names, and the level in force (the hardware's best, lowered by SOL_ISA).
#include <cstdlib>
#include <string>

#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {
constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx};
constexpr const char* kAcceptedNames = "scalar, avx2, avx512 or amx";
}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
  }
  return "unknown";
}

Isa parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas)
    if (isa_name(isa) == name) return isa;
  fail("parse_isa", "unknown ISA '", name, "': expected ", kAcceptedNames);
}

// Re-read on every call so tests (and a long-lived process) can switch paths with setenv.
// Asking for more than the machine has is not an error: SOL_ISA=amx on a machine without AMX
// runs the best path there is, so one setting works across the fleet.
Isa active_isa() {
  Isa best = cpu_features().best_isa;
  const char* env = std::getenv("SOL_ISA");
  if (!env || !*env) return best;
  std::string_view requested = env;
  for (Isa isa : kAllIsas)
    if (isa_name(isa) == requested) return isa < best ? isa : best;
  fail("SOL_ISA", "unknown value '", requested, "': expected ", kAcceptedNames);
}

bool isa_at_least(Isa isa) { return active_isa() >= isa; }

}  // namespace sol
