#include "device/cuda/nvrtc_jit.h"

#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "core/disk_cache.h"
#include "sol/error.h"

namespace sol::cuda {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool use_nvcc() { return env("SOL_CUDA_JIT") == "nvcc"; }

std::string nvcc_path() {
  const std::string p = env("SOL_NVCC");
  return p.empty() ? "/usr/local/cuda/bin/nvcc" : p;
}

void check_nvrtc(nvrtcResult r, const std::string& program, const char* what) {
  if (r != NVRTC_SUCCESS) fail("cuda jit", program, ": ", what, " failed: ", nvrtcGetErrorString(r));
}

// A compiler log that says more than nothing: NVRTC and nvcc print only warnings and errors.
bool log_has_diagnostics(const std::string& log) {
  return log.find("warning") != std::string::npos || log.find("error") != std::string::npos;
}

void compile_with_nvrtc(const CudaProgram& program, const std::string& arch, const std::string& out) {
  std::vector<const char*> names, texts;
  for (const EmbeddedHeader& h : embedded_headers()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, program.source.c_str(), (program.name + ".cu").c_str(), int(names.size()),
                                 texts.data(), names.data()),
              program.name, "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::vector<std::string> options = compile_options(program, arch);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (r != NVRTC_SUCCESS || log_has_diagnostics(log))
    fail("cuda jit", "NVRTC ", r != NVRTC_SUCCESS ? "failed" : "warned", " compiling ", program.name, " for ", arch,
         " (warnings are errors):\n", log.substr(0, 6000));
  size_t size = 0;
  check_nvrtc(nvrtcGetCUBINSize(prog, &size), program.name, "nvrtcGetCUBINSize");
  std::string image(size, '\0');
  check_nvrtc(nvrtcGetCUBIN(prog, image.data()), program.name, "nvrtcGetCUBIN");
  disk_cache::publish_file(out, image, "cuda jit");
}

// The headers are written beside the source (under a directory named by their digest) so nvcc
// sees exactly the text NVRTC would.
void compile_with_nvcc(const CudaProgram& program, const std::string& arch, const std::string& out) {
  std::string all;
  for (const EmbeddedHeader& h : embedded_headers()) all += std::string(h.name) + '\n' + h.text;
  const std::string dir = cubin_cache_dir() + "/nvcc-" + disk_cache::digest(all).substr(0, 16);
  for (const EmbeddedHeader& h : embedded_headers()) {
    const std::string path = dir + "/" + h.name;
    disk_cache::make_dirs(path.substr(0, path.rfind('/')), "cuda jit");
    if (disk_cache::read_file(path) != h.text) disk_cache::publish_file(path, h.text, "cuda jit");
  }
  const std::string src = out + ".cu";
  disk_cache::publish_file(src, program.source, "cuda jit");
  std::string cmd = nvcc_path() + " -cubin -I'" + dir + "'";
  for (const std::string& o : compile_options(program, arch)) cmd += " '" + o + "'";
  const std::string log_path = out + ".log";
  cmd += " '" + src + "' -o '" + out + "' > '" + log_path + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = disk_cache::read_file(log_path);
  ::unlink(log_path.c_str());
  ::unlink(src.c_str());
  if (rc != 0 || log_has_diagnostics(log))
    fail("cuda jit", "nvcc ", rc != 0 ? "failed" : "warned", " compiling ", program.name, " (", cmd,
         ", warnings are errors):\n", log.substr(0, 6000));
}

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + " (missing)";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
}

}  // namespace

std::string compiler_identity() {
  if (use_nvcc()) return "nvcc " + file_identity(nvcc_path());
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

std::string cubin_cache_dir() {
  const std::string d = env("SOL_CUDA_CACHE_DIR");
  return d.empty() ? disk_cache::sol_cache_root() + "/cuda" : d;
}

std::vector<std::string> compile_options(const CudaProgram& program, const std::string& arch) {
  std::vector<std::string> o = {"-arch=" + arch, "-std=c++17", "-lineinfo", "-DSOL_CUDA_DEVICE_CODE=1"};
  o.insert(o.end(), program.options.begin(), program.options.end());
  return o;
}

std::string cubin_cache_key(const CudaProgram& program, const std::string& arch) {
  std::ostringstream key;
  key << "--compiler " << compiler_identity() << "\n--arch " << arch << "\n--options";
  for (const std::string& o : compile_options(program, arch)) key << ' ' << o;
  key << "\n--source " << program.name << '\n' << program.source;
  for (const EmbeddedHeader& h : embedded_headers()) key << "\n--header " << h.name << '\n' << h.text;
  return disk_cache::digest(key.str());
}

Cubin compile_cubin(const CudaProgram& program, const std::string& arch) {
  const std::string key = cubin_cache_key(program, arch);
  const auto build = [&](const std::string& tmp) {
    if (use_nvcc()) compile_with_nvcc(program, arch, tmp);
    else compile_with_nvrtc(program, arch, tmp);
  };
  const disk_cache::Entry e = disk_cache::get_or_build(cubin_cache_dir(), program.name + "-" + arch + "-" + key + ".cubin",
                                                       "cuda jit", build, disk_cache::elf_looks_complete);
  Cubin c{e.path, disk_cache::read_file(e.path), e.hit};
  check(!c.image.empty(), "cuda jit", "cannot read ", e.path);
  return c;
}

}  // namespace sol::cuda
