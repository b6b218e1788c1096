#include "device/cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "sol/error.h"

namespace sol::cuda {

namespace {

// The driver's own exported name of an entry point (cuMemAlloc -> "cuMemAlloc_v2"): the
// fallback when cuGetProcAddress cannot answer (the toolkit's stub library, very old drivers).
#define SOL_CUDA_STRINGIFY_EXPANDED(x) SOL_CUDA_STRINGIFY(x)
#define SOL_CUDA_STRINGIFY(x) #x

std::string describe_error(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName && d.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.cuGetErrorString && d.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string s = name ? name : "CUresult " + std::to_string(int(r));
  if (text) s += std::string(" (") + text + ")";
  // The stub cannot name its own error.
  else if (r == CUDA_ERROR_STUB_LIBRARY) s += " (CUDA_ERROR_STUB_LIBRARY: the toolkit's stub, not an NVIDIA driver)";
  return s;
}

struct Loaded {
  Driver table;
  bool ok = false;
  std::string reason;
};

Loaded load() {
  Loaded l;
  const char* override_path = std::getenv("SOL_CUDA_DRIVER");
  const char* path = override_path && *override_path ? override_path : "libcuda.so.1";
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    l.reason = std::string("cannot load the CUDA driver ") + path + " (no NVIDIA driver installed?): " +
               (e ? e : "unknown dlopen error");
    return l;
  }
  using GetProcAddress = decltype(&::cuGetProcAddress);
  auto get_proc = reinterpret_cast<GetProcAddress>(::dlsym(lib, SOL_CUDA_STRINGIFY_EXPANDED(cuGetProcAddress)));
  Driver& d = l.table;
  const auto resolve = [&](const char* name, const char* exported, void** slot) {
    CUdriverProcAddressQueryResult status{};
    if (get_proc && get_proc(name, slot, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
        *slot)
      return true;
    *slot = ::dlsym(lib, exported);
    return *slot != nullptr;
  };
#define SOL_CUDA_RESOLVE_ENTRY(name)                                                                   \
  if (!resolve(#name, SOL_CUDA_STRINGIFY_EXPANDED(name), reinterpret_cast<void**>(&d.name))) {         \
    l.reason = std::string(path) + " has no entry point " #name " for the CUDA " +                      \
               std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) + \
               " ABI Sol was built against (driver too old?)";                                          \
    return l;                                                                                           \
  }
  SOL_CUDA_DRIVER_ENTRY_POINTS(SOL_CUDA_RESOLVE_ENTRY)
#undef SOL_CUDA_RESOLVE_ENTRY
  if (const CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    l.reason = std::string("cuInit failed in ") + path + ": " + describe_error(d, r);
    return l;
  }
  d.cuDriverGetVersion(&d.version);
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Driver* driver(std::string* reason) {
  const Loaded& l = loaded();
  if (reason) *reason = l.reason;
  return l.ok ? &l.table : nullptr;
}

const Driver& require_driver(const char* who) {
  std::string reason;
  const Driver* d = driver(&reason);
  if (!d) fail(who, "no CUDA driver: ", reason);
  return *d;
}

std::string error_text(CUresult r) { return describe_error(loaded().table, r); }

void check_cu(CUresult r, const char* who, const char* what) {
  if (r != CUDA_SUCCESS) fail(who, what, " failed: ", error_text(r));
}

}  // namespace sol::cuda
