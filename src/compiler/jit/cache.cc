// The CPU JIT's cache: its keys, and compiling a kernel into it through the shared on-disk
// cache protocol (core/disk_cache.h: flock, private temporary, atomic rename, validity check).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "compiler/jit/jit.h"
#include "core/disk_cache.h"
#include "hw/cpu_identity.h"
#include "sol/error.h"

namespace sol::tile {

extern const char kRuntimeHeaderText[];  // sol_tile_runtime.h, embedded (cmake/SolTileRuntime.cmake)

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string compiler() {
  const std::string c = env("SOL_JIT_CXX");
  return c.empty() ? "g++" : c;
}

// The compiler's identity without running it (a `g++ --version` costs milliseconds a cache hit
// cannot spend): the resolved path of the binary, its size and modification time.
std::string compiler_identity() {
  static const std::string id = [] {
    std::string path = compiler();
    if (path.find('/') == std::string::npos) {
      std::istringstream dirs(env("PATH"));
      for (std::string d; std::getline(dirs, d, ':');)
        if (::access((d + "/" + path).c_str(), X_OK) == 0) {
          path = d + "/" + path;
          break;
        }
    }
    char real[4096];
    if (::realpath(path.c_str(), real)) path = real;
    struct stat st {};
    ::stat(path.c_str(), &st);
    return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
  }();
  return id;
}

// The generated lines the compiler's "FILE:LINE:" messages point at, appended to its output.
std::string explain_errors(const std::string& log, const std::string& source_path, const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream src(source);
  for (std::string l; std::getline(src, l);) lines.push_back(l);
  std::ostringstream out;
  std::istringstream in(log);
  int shown = 0;
  for (std::string l; std::getline(in, l) && shown < 12;) {
    if (l.rfind(source_path + ":", 0) != 0 || l.find("error") == std::string::npos) continue;
    const size_t n = size_t(std::atoi(l.c_str() + source_path.size() + 1));
    out << "  " << l.substr(source_path.size() + 1) << "\n";
    if (n >= 1 && n <= lines.size()) out << "    generated line " << n << ": " << lines[n - 1] << "\n";
    ++shown;
  }
  return out.str();
}

}  // namespace

std::string runtime_text() {
  const std::string d = env("SOL_TILE_RUNTIME_DIR");
  if (d.empty()) return kRuntimeHeaderText;
  const std::string text = disk_cache::read_file(d + "/sol_tile_runtime.h");
  check(!text.empty(), "tile jit", "cannot read ", d,
        "/sol_tile_runtime.h (SOL_TILE_RUNTIME_DIR must name the directory holding it)");
  return text;
}

std::string runtime_dir() {
  const std::string d = env("SOL_TILE_RUNTIME_DIR");
  if (!d.empty()) return d;
  // The embedded header, published once per distinct text like a kernel: a private temporary
  // renamed into place, so concurrent processes never see half a file.
  const std::string text = kRuntimeHeaderText;
  const std::string dir = cache_dir() + "/runtime-" + disk_cache::digest(text).substr(0, 16);
  const std::string header = dir + "/sol_tile_runtime.h";
  if (disk_cache::read_file(header) == text) return dir;
  disk_cache::make_dirs(dir, "tile jit");
  disk_cache::publish_file(header, text, "tile jit");
  return dir;
}

std::string cache_dir() {
  const std::string d = env("SOL_JIT_CACHE_DIR");
  return d.empty() ? disk_cache::sol_cache_root() + "/jit" : d;
}

// -fno-trapping-math: lets GCC if-convert the float->int steps of exp2_fast and vectorize the
// element-wise loops (only the floating-point exception flags may differ).
std::string compile_flags() { return "-std=c++20 -O3 -march=native -fno-trapping-math -fopenmp -fPIC -shared -w"; }

std::string cache_key(const std::string& ir_text, const std::string& target, const std::string& flags) {
  static const std::string runtime = runtime_text();
  // -march=native: the object is only valid on this CPU, so the CPU's identity is in the key.
  return disk_cache::digest(ir_text + "\n--target " + target + "\n--flags " + flags + "\n--cxx " +
                            compiler_identity() + "\n--cpu " + cpu_identity() + "\n--runtime\n" + runtime);
}

BuiltObject build_object(const std::string& key, const std::string& source, const std::string& kernel_name) {
  const std::string dir = cache_dir();
  const auto build = [&](const std::string& tmp_so) {
    // The source is kept beside the object, so a compiler message's FILE:LINE can be opened.
    const std::string src_path = dir + "/" + key + ".cc";
    disk_cache::publish_file(src_path, source, "tile jit");
    const std::string log = tmp_so + ".log";
    const std::string cmd = compiler() + " " + compile_flags() + " -I'" + runtime_dir() + "' -x c++ '" + src_path +
                            "' -o '" + tmp_so + "' > '" + log + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    const std::string messages = disk_cache::read_file(log);
    ::unlink(log.c_str());
    if (rc != 0)
      fail("tile jit", "compiling kernel ", kernel_name, " failed (", cmd, "):\n",
           explain_errors(messages, src_path, source), messages.substr(0, 4000));
  };
  const disk_cache::Entry e = disk_cache::get_or_build(dir, key + ".so", "tile jit", build, disk_cache::elf_looks_complete);
  return {e.path, e.hit};
}

}  // namespace sol::tile
