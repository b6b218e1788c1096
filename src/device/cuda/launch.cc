#include "device/cuda/launch.h"

#include <map>
#include <mutex>
#include <tuple>

#include "device/cuda/context.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol::cuda {

namespace {

struct Loaded {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, CUlibrary> libraries;  // (program name, device index)
  std::map<std::tuple<std::string, int, std::string>, CUfunction> kernels;
  std::map<std::pair<CUfunction, size_t>, bool> shared_limit_set;
};

Loaded& loaded() {
  static Loaded* l = new Loaded;  // libraries live as long as the primary contexts
  return *l;
}

}  // namespace

Kernel get_kernel(const CudaProgram& program, const char* kernel_name, Device device) {
  const Driver& d = use_device(device, "cuda jit");
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  const auto kernel_key = std::make_tuple(program.name, device.index, std::string(kernel_name));
  if (auto it = l.kernels.find(kernel_key); it != l.kernels.end()) return {it->second, device, kernel_name};
  CUlibrary& lib = l.libraries[{program.name, device.index}];
  if (!lib) {
    const Cubin cubin = compile_cubin(program, cuda_device(device.index).arch());
    if (const CUresult r = d.cuLibraryLoadData(&lib, cubin.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
        r != CUDA_SUCCESS) {
      lib = nullptr;
      fail("cuda jit", "cuLibraryLoadData of ", cubin.path, " on ", device, " failed: ", error_text(r));
    }
  }
  CUkernel k;
  if (const CUresult r = d.cuLibraryGetKernel(&k, lib, kernel_name); r != CUDA_SUCCESS)
    fail("cuda jit", "program ", program.name, " has no kernel ", kernel_name, ": ", error_text(r));
  CUfunction f;
  check_cu(d.cuKernelGetFunction(&f, k), "cuda jit", "cuKernelGetFunction");
  l.kernels[kernel_key] = f;
  return {f, device, kernel_name};
}

void launch(const Kernel& kernel, const LaunchShape& shape, void* stream, void** args) {
  const Driver& d = use_device(kernel.device, "cuda launch");
  if (shape.dynamic_shared_bytes > 48 * 1024) {
    Loaded& l = loaded();
    std::lock_guard<std::mutex> lock(l.mutex);
    bool& done = l.shared_limit_set[{kernel.function, shape.dynamic_shared_bytes}];
    if (!done) {
      if (const CUresult r = d.cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                  int(shape.dynamic_shared_bytes));
          r != CUDA_SUCCESS)
        fail("cuda launch", kernel.name, ": ", shape.dynamic_shared_bytes,
             " bytes of dynamic shared memory refused: ", error_text(r));
      done = true;
    }
  }
  CUlaunchConfig config{};
  config.gridDimX = shape.grid[0];
  config.gridDimY = shape.grid[1];
  config.gridDimZ = shape.grid[2];
  config.blockDimX = shape.block[0];
  config.blockDimY = shape.block[1];
  config.blockDimZ = shape.block[2];
  config.sharedMemBytes = unsigned(shape.dynamic_shared_bytes);
  config.hStream = static_cast<CUstream>(stream);
  CUlaunchAttribute cluster{};
  if (shape.cluster != std::array<unsigned, 3>{1, 1, 1}) {
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = shape.cluster[0];
    cluster.value.clusterDim.y = shape.cluster[1];
    cluster.value.clusterDim.z = shape.cluster[2];
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  if (const CUresult r = d.cuLaunchKernelEx(&config, kernel.function, args, nullptr); r != CUDA_SUCCESS)
    fail("cuda launch", kernel.name, " grid (", shape.grid[0], ", ", shape.grid[1], ", ", shape.grid[2], ") block (",
         shape.block[0], ", ", shape.block[1], ", ", shape.block[2], ") cluster (", shape.cluster[0], ", ",
         shape.cluster[1], ", ", shape.cluster[2], ") shared ", shape.dynamic_shared_bytes, " B failed: ", error_text(r));
}

}  // namespace sol::cuda
