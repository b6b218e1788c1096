#pragma once
// The passes of the CPU pipeline, in order; each rewrites the program in place, one small file
// each, with IR-in -> IR-out golden tests in tests/compiler/golden/.
#include "sol/tile.h"
#include "sol/tile_ir.h"

namespace sol::tile {

void tile_loops(Program& p);         // tile_loops.cc
void infer_layouts(Program& p, const CpuTarget& cpu);  // infer_layouts.cc
void software_pipeline(Program& p);  // software_pipeline.cc
void lower_cpu(Program& p);          // lower_cpu.cc
void unroll_loops(Program& p);       // unroll.cc
void reuse_tiles(Program& p);        // reuse_tiles.cc
void plan_scratch(Program& p);       // plan_scratch.cc

}  // namespace sol::tile
