// The pass pipeline: verify, then each pass in order (re-verifying after each one, so a pass
// that breaks the program is caught at its own door), with an IR dump after any pass asked for.
#include <iostream>
#include <span>

#include "compiler/passes/passes.h"
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {

namespace {

struct PassInfo {
  const char* name;
  void (*run)(Program&, const CpuTarget&);
};

// Most passes read only the program; the target's data reaches the ones that need it.
template <void (*Pass)(Program&)>
void program_only(Program& p, const CpuTarget&) {
  Pass(p);
}

constexpr PassInfo kCpuPasses[] = {
    {"tile-loops", program_only<tile_loops>}, {"infer-layouts", infer_layouts},
    {"software-pipeline", program_only<software_pipeline>}, {"lower-cpu", program_only<lower_cpu>},
    {"unroll", program_only<unroll_loops>}, {"reuse-tiles", program_only<reuse_tiles>},
    {"plan-scratch", program_only<plan_scratch>},
};

// CUDA: tiles stay row-major in shared memory and gemm is mapped by the code generator
// (emit_cuda.cc), so only loop tiling, unrolling and shared-memory planning run.
constexpr PassInfo kCudaPasses[] = {
    {"tile-loops", program_only<tile_loops>},
    {"unroll", program_only<unroll_loops>},
    {"plan-scratch", program_only<plan_scratch>},
};

std::span<const PassInfo> passes_for(Target t) {
  if (t == Target::cuda) return kCudaPasses;
  return kCpuPasses;
}

}  // namespace

std::vector<std::string> pass_names() { return pass_names_for(Target::cpu); }

std::vector<std::string> pass_names_for(Target target) {
  std::vector<std::string> out;
  for (const PassInfo& p : passes_for(target)) out.push_back(p.name);
  return out;
}

Program lower(const Program& input, const CompileOptions& opt) {
  const std::span<const PassInfo> kPasses = passes_for(opt.target);
  for (const std::string& want : opt.dump_after) {
    bool known = want == "all" || want == "input";
    for (const PassInfo& p : kPasses) known = known || want == p.name;
    if (!known) {
      std::string list = "input, all";
      for (const PassInfo& p : kPasses) list += std::string(", ") + p.name;
      fail("tile compile", "--dump-after ", want, " is not a pass of this target (", list, ")");
    }
  }
  std::ostream& dump = opt.dump ? *opt.dump : std::cerr;
  auto dumped = [&](const std::string& name) {
    for (const std::string& w : opt.dump_after)
      if (w == name || w == "all") return true;
    return false;
  };
  verify(input);
  const CpuTarget cpu = opt.cpu.value_or(CpuTarget{});  // compile() resolves the machine's
  Program p = input;
  if (dumped("input")) dump << "// -----// IR after input //----- //\n" << print(p);
  for (const PassInfo& pass : kPasses) {
    pass.run(p, cpu);
    verify(p);
    if (dumped(pass.name)) dump << "// -----// IR after " << pass.name << " //----- //\n" << print(p);
  }
  return p;
}

}  // namespace sol::tile
