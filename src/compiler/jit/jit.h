#pragma once
// The JIT: generated C++ -> shared object in the on-disk cache -> loaded entry point.
#include <string>

#include "compiler/runtime/sol_tile_runtime.h"

namespace sol::tile {

const sol_rt::Runtime& runtime_table();  // runtime_table.cc

// The text of sol_tile_runtime.h kernels are built against: the copy embedded in libsol at
// build time, or $SOL_TILE_RUNTIME_DIR/sol_tile_runtime.h when that is set.
std::string runtime_text();
// A directory holding that header for the compiler's -I: $SOL_TILE_RUNTIME_DIR, else
// <cache dir>/runtime-<digest>, where the embedded text is written on first use. Neither the
// source tree nor an install prefix is needed at run time.
std::string runtime_dir();
// $SOL_JIT_CACHE_DIR, else $XDG_CACHE_HOME/sol/jit, else $HOME/.cache/sol/jit.
std::string cache_dir();
// Hex digest of everything that decides the object code.
std::string cache_key(const std::string& ir_text, const std::string& target, const std::string& flags);
// The compiler command line flags (cache key input too).
std::string compile_flags();

struct BuiltObject {
  std::string path;
  bool from_disk = false;
};
// Returns the cached object for key, or compiles `source` into it (one process compiles, the
// others wait on a lock; the result is published by rename). Throws sol::Error with the
// compiler's messages and the generated lines they point at.
BuiltObject build_object(const std::string& key, const std::string& source, const std::string& kernel_name);

}  // namespace sol::tile
