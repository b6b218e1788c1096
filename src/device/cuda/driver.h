#pragma once
// The CUDA driver API, reached only through dlopen("libcuda.so.1") and a table of entry points
// resolved with cuGetProcAddress at the ABI of the cuda.h Sol was compiled against. Linking
// -lcuda would bind Sol to the toolkit's stub on machines without a driver (it then fails to
// load); through the table, a machine without a GPU gets a sentence saying why instead.
#include <cuda.h>

#include <string>

namespace sol::cuda {

#define SOL_CUDA_DRIVER_ENTRY_POINTS(X)                                                        \
  X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDriverGetVersion) X(cuDeviceGetCount)   \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)               \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                 \
  X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)             \
  X(cuStreamWaitEvent)                                                                        \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery)   \
  X(cuEventElapsedTime) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost)         \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                                                  \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuLibraryLoadData) X(cuLibraryUnload)             \
  X(cuLibraryGetKernel) X(cuKernelGetFunction) X(cuFuncSetAttribute) X(cuLaunchKernelEx)          \
  X(cuTensorMapEncodeTiled)

struct Driver {
#define SOL_CUDA_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  SOL_CUDA_DRIVER_ENTRY_POINTS(SOL_CUDA_DECLARE_ENTRY)
#undef SOL_CUDA_DECLARE_ENTRY
  int version = 0;  // cuDriverGetVersion: 13000 for 13.0
};

// The driver table with cuInit done, or nullptr; `reason` then says why (no libcuda.so.1, an
// entry point missing, cuInit's error name and text). Loaded once per process.
// $SOL_CUDA_DRIVER names another library to load (tests point it at the toolkit's stub).
const Driver* driver(std::string* reason = nullptr);

// The driver, or sol::Error naming `who` and the reason there is none.
const Driver& require_driver(const char* who);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the bare number when the driver cannot name it.
std::string error_text(CUresult r);

// Throws sol::Error "who: what failed: CUDA_ERROR_... (text)" unless r is CUDA_SUCCESS.
void check_cu(CUresult r, const char* who, const char* what);

}  // namespace sol::cuda
