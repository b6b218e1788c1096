// Compiles a CUDA source with NVRTC for sm_90a, as Sol's JIT will at run time, and writes the
// cubin for the SASS checks: the sm90 headers must build without host standard headers and
// without a warning (a warning fails the check, as -Werror does under nvcc) and without ptxas
// changing the wgmma pipeline.
//   nvrtc_compile_check SRC INCLUDE_DIR OUT_CUBIN
#include <nvrtc.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ok(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return true;
  std::cerr << "FAIL: " << what << ": " << nvrtcGetErrorString(r) << "\n";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: nvrtc_compile_check SRC INCLUDE_DIR OUT_CUBIN\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "FAIL: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream source;
  source << in.rdbuf();
  const std::string text = source.str(), include = std::string("-I") + argv[2];
  nvrtcProgram prog;
  if (!ok(nvrtcCreateProgram(&prog, text.c_str(), argv[1], 0, nullptr, nullptr), "nvrtcCreateProgram")) return 1;
  const std::vector<const char*> options = {"--gpu-architecture=sm_90a", "-std=c++20", include.c_str(),
                                            "-Xptxas=--warn-on-spills",
                                            "-Xptxas=--warn-on-local-memory-usage", "-Xptxas=-Werror",
                                            "-Xptxas=--verbose"};
  const nvrtcResult compiled = nvrtcCompileProgram(prog, int(options.size()), options.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  std::cout << log;
  if (!ok(compiled, "nvrtcCompileProgram")) return 1;
  if (log.find("warning") != std::string::npos) {
    std::cerr << "FAIL: NVRTC warned\n";
    return 1;
  }
  // ptxas notes C75xx when it changes the wgmma pipeline (C7511 serialised, C7517 added waits).
  if (log.find("(C75") != std::string::npos) {
    std::cerr << "FAIL: ptxas altered the wgmma pipeline\n";
    return 1;
  }
  std::size_t cubin_size = 0;
  if (!ok(nvrtcGetCUBINSize(prog, &cubin_size), "nvrtcGetCUBINSize")) return 1;
  std::vector<char> cubin(cubin_size);
  if (!ok(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN")) return 1;
  std::ofstream(argv[3], std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  nvrtcDestroyProgram(&prog);
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::cout << "ok: NVRTC " << major << "." << minor << " built " << argv[1] << " for sm_90a (" << cubin_size
            << " bytes of cubin)\n";
  return 0;
}
