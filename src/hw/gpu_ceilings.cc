// The device ceilings' names and units, and measure_gpu_ceiling's checks; the loops themselves
// are in gpu_ceiling_loops_cuda.cc (built only with the CUDA backend).
#include <algorithm>
#include <iterator>

#include "hw/gpu_ceilings.h"
#include "sol/device.h"
#include "sol/error.h"

#if SOL_HAS_CUDA
#include "hw/gpu_ceiling_loops.h"
#endif

namespace sol {

bool gpu_ceiling_is_memory(std::string_view name) {
  return name == "hbm_read" || name == "hbm_copy" || name == "hbm_write" || name == "l2_read";
}

std::string_view gpu_ceiling_for(Unit u) {
  switch (u) {
    case Unit::mem_read: return "hbm_read";
    case Unit::mem_copy:
    case Unit::mem_triad:
    case Unit::mem_update: return "hbm_copy";
    case Unit::mem_write: return "hbm_write";
    case Unit::l2_read: return "l2_read";
    case Unit::fma_f32: return "fma_f32";
    case Unit::dot_bf16:
    case Unit::amx_bf16: return "mma_bf16";
    case Unit::dot_s8:
    case Unit::amx_int8:
    case Unit::clock: return "";
  }
  return "";
}

double measure_gpu_ceiling(std::string_view name, Device device, double seconds) {
  check(std::find(std::begin(kGpuCeilingNames), std::end(kGpuCeilingNames), name) != std::end(kGpuCeilingNames),
        "measure_gpu_ceiling", "unknown ceiling '", name, "'");
  check(!device.is_cpu(), "measure_gpu_ceiling", "device = cpu; CPU ceilings are measure_ceiling's");
  check(seconds > 0, "measure_gpu_ceiling", "seconds = ", seconds, " but must be > 0");
  cuda_device(device.index);  // sol::Error with discovery's reason when there is none
#if SOL_HAS_CUDA
  return cuda::measure_ceiling_loop(name, device, seconds);
#else
  fail("measure_gpu_ceiling", cuda_discovery().reason);
#endif
}

}  // namespace sol
