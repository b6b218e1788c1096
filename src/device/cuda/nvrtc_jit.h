#pragma once
// CUDA device code compiled at first use, as DeepGEMM does: the kernels are header-only text
// (src/kernels/cuda, embedded into libsol by cmake/SolCudaKernels.cmake), compiled by NVRTC for
// the device's architecture into a cubin, and cached on disk under a key that hashes everything
// that decides the cubin: the source, the text of every embedded header, the options, the
// compiler's version and the architecture. The cache uses core/disk_cache.h's protocol (flock,
// private temporary, atomic rename; a truncated or corrupted cubin is rebuilt).
// SOL_CUDA_JIT=nvcc compiles with nvcc instead (for debugging: -G, -lineinfo, --keep).
#include <span>
#include <string>
#include <vector>

namespace sol::cuda {

struct EmbeddedHeader {
  const char* name;  // as included: "kernels/cuda/convert.cuh"
  const char* text;
};
std::span<const EmbeddedHeader> embedded_headers();  // generated source

struct CudaProgram {
  std::string name;    // for messages and the source's file name: "sol_copy"
  std::string source;  // the translation unit (usually a few #includes of embedded headers)
  std::vector<std::string> options;  // beyond Sol's defaults
};

// "nvrtc 13.0", or "nvcc <path> <size> <mtime>" under SOL_CUDA_JIT=nvcc.
std::string compiler_identity();
// $SOL_CUDA_CACHE_DIR, else $XDG_CACHE_HOME/sol/cuda, else $HOME/.cache/sol/cuda.
std::string cubin_cache_dir();
// The options Sol passes for `arch` (also part of the key).
std::vector<std::string> compile_options(const CudaProgram& program, const std::string& arch);
std::string cubin_cache_key(const CudaProgram& program, const std::string& arch);

struct Cubin {
  std::string path;
  std::string image;  // the cubin's bytes
  bool hit = false;   // read from the cache rather than compiled by this call
};
// The cached cubin of `program` for `arch` ("sm_90a"), compiling it on a miss. Throws
// sol::Error with the compiler's log when compilation fails, or when it warns.
Cubin compile_cubin(const CudaProgram& program, const std::string& arch);

}  // namespace sol::cuda
