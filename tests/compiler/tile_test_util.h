#pragma once
// Shared helpers of the tile compiler tests: example paths, programs used by several tests,
// and a private JIT cache directory for the whole test binary.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include <unistd.h>

#include "ops/common/fill.h"
#include "sol/tensor.h"
#include "sol/tile.h"

namespace sol::tile::testing {

// __FILE__ is relative to the build directory when Ninja compiles (../tests/...), and ctest runs
// the binary from <build>/tests, so resolve it against the build directory: the binary lives in
// <build>/bin.
inline std::filesystem::path source_root() {
  std::filesystem::path f = __FILE__;
  if (f.is_relative()) f = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / f;
  return std::filesystem::weakly_canonical(f).parent_path().parent_path().parent_path();
}
inline std::filesystem::path golden_dir() { return source_root() / "tests/compiler/golden"; }

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The input program of a golden case (tests/compiler/golden/NAME.in.tile).
inline Program golden_input(const std::string& name) {
  return parse(read_text(golden_dir() / (name + ".in.tile")), name);
}

// A buffer of random values (ops/common/fill.h, magnitude 1) from `seed`.
inline Buffer random_buffer(DType t, std::initializer_list<int64_t> shape, uint64_t seed) {
  Buffer b(t, shape);
  fill_random(b, seed, 1.0);
  return b;
}

inline Program example(const std::string& name) {
  const auto path = source_root() / "examples/tile" / name;
  return parse(read_text(path), path.string());
}

// A per-process cache directory under the system temp dir, set once before any compile and
// removed when the test binary exits.
inline const std::string& test_cache_dir() {
  struct Dir {
    std::string path;
    Dir() {
      const auto d = std::filesystem::temp_directory_path() / ("sol-tile-test-" + std::to_string(::getpid()));
      std::filesystem::create_directories(d);
      ::setenv("SOL_JIT_CACHE_DIR", d.c_str(), 1);
      path = d.string();
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace sol::tile::testing
