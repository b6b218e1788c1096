// The on-disk JIT cache: keys, directories, and compiling a kernel into it safely when several
// processes want the same kernel at once (flock on KEY.lock; compile to a private temporary;
// rename() publishes the finished object atomically, so a reader never sees half a file).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/jit/jit.h"
#include "sol/error.h"

namespace sol::tile {

extern const char kRuntimeHeaderText[];  // sol_tile_runtime.h, embedded (cmake/SolTileRuntime.cmake)

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  struct stat st {};
  check(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "tile jit", "cannot create cache directory ", path);
}

// FNV-1a, twice with different offsets: 128 bits, ample for a cache key.
std::string digest(const std::string& text) {
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (uint64_t& x : h)
    for (unsigned char c : text) x = (x ^ c) * 0x100000001b3ull, x ^= x >> 29;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h[0]),
                static_cast<unsigned long long>(h[1]));
  return buf;
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
  const std::string text = read_file(d + "/sol_tile_runtime.h");
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
  const std::string dir = cache_dir() + "/runtime-" + digest(text).substr(0, 16);
  const std::string header = dir + "/sol_tile_runtime.h";
  if (read_file(header) == text) return dir;
  make_dirs(dir);
  const std::string tmp = header + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  {
    std::ofstream out(tmp);
    out << text;
    check(bool(out), "tile jit", "cannot write ", tmp);
  }
  check(::rename(tmp.c_str(), header.c_str()) == 0, "tile jit", "cannot publish ", header);
  return dir;
}

std::string cache_dir() {
  std::string d = env("SOL_JIT_CACHE_DIR");
  if (d.empty()) {
    const std::string xdg = env("XDG_CACHE_HOME");
    d = (xdg.empty() ? env("HOME") + "/.cache" : xdg) + "/sol/jit";
  }
  return d;
}

// -fno-trapping-math: lets GCC if-convert the float->int steps of exp2_fast and vectorize the
// element-wise loops (only the floating-point exception flags may differ).
std::string compile_flags() { return "-std=c++20 -O3 -march=native -fno-trapping-math -fopenmp -fPIC -shared -w"; }

std::string cache_key(const std::string& ir_text, const std::string& target, const std::string& flags) {
  static const std::string runtime = runtime_text();
  return digest(ir_text + "\n--target " + target + "\n--flags " + flags + "\n--cxx " + compiler_identity() +
                "\n--runtime\n" + runtime);
}

BuiltObject build_object(const std::string& key, const std::string& source, const std::string& kernel_name) {
  const std::string dir = cache_dir();
  const std::string so = dir + "/" + key + ".so";
  if (::access(so.c_str(), R_OK) == 0) return {so, true};
  make_dirs(dir);
  const int lock = ::open((dir + "/" + key + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  check(lock >= 0, "tile jit", "cannot open a lock file in ", dir);
  ::flock(lock, LOCK_EX);  // another process compiling the same key finishes first
  struct Unlock {
    int fd;
    ~Unlock() {
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  } unlock{lock};
  if (::access(so.c_str(), R_OK) == 0) return {so, true};

  const std::string tag = std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  const std::string src_path = dir + "/" + key + ".cc";
  const std::string tmp_src = src_path + ".tmp." + tag, tmp_so = so + ".tmp." + tag, log = so + ".log." + tag;
  {
    std::ofstream out(tmp_src);
    out << source;
    check(bool(out), "tile jit", "cannot write ", tmp_src);
  }
  check(::rename(tmp_src.c_str(), src_path.c_str()) == 0, "tile jit", "cannot publish ", src_path);
  const std::string cmd = compiler() + " " + compile_flags() + " -I'" + runtime_dir() + "' -x c++ '" + src_path +
                          "' -o '" + tmp_so + "' > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string messages = read_file(log);
  ::unlink(log.c_str());
  if (rc != 0) {
    ::unlink(tmp_so.c_str());
    fail("tile jit", "compiling kernel ", kernel_name, " failed (", cmd, "):\n",
         explain_errors(messages, src_path, source), messages.substr(0, 4000));
  }
  check(::rename(tmp_so.c_str(), so.c_str()) == 0, "tile jit", "cannot publish ", so);
  return {so, false};
}

}  // namespace sol::tile
