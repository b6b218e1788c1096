// The tile DSL: whatever parses and verifies must print to text that parses back to the same
// program (compared by printing again), and must lower and emit for both targets with nothing
// but sol::Error on the way.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "sol/tile.h"

namespace {
constexpr const char* kFile = "fuzz.tile";

void lower_and_emit(const sol::tile::Program& p) {
  using namespace sol::tile;
  // Both CPU targets: bf16 A tiles as pairs and widened to f32.
  for (bool widen : {false, true}) {
    CompileOptions cpu;
    cpu.cpu = CpuTarget{.widen_bf16_a = widen};
    sol::fuzz::expect_clean([&] { emit_cpp(lower(p, cpu)); }, {"kernel ", "tile codegen", "tile compile", "line "});
  }
  CompileOptions cuda;
  cuda.target = Target::cuda;
  sol::fuzz::expect_clean([&] { emit_cuda(lower(p, cuda)); }, {"kernel ", "tile codegen", "tile compile", "line "});
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sol::tile;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Program p;
  bool parsed = false;
  sol::fuzz::expect_clean(
      [&] {
        p = parse(text, kFile);
        parsed = true;
      },
      {kFile});
  if (!parsed) return 0;
  bool verified = false;
  sol::fuzz::expect_clean(
      [&] {
        verify(p);
        verified = true;
      },
      {"kernel ", "line "});
  if (!verified) return 0;
  const std::string printed = print(p);
  std::string again;
  try {
    again = print(parse(printed, kFile));
  } catch (const sol::Error& e) {
    sol::fuzz::finding("a printed, verified program does not parse", std::string(e.what()) + "\n" + printed);
  }
  if (again != printed) sol::fuzz::finding("print(parse(print(p))) != print(p)", printed + "\n----\n" + again);
  lower_and_emit(p);
  return 0;
}
