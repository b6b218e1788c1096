// gemm_sm90 (gemm_sm90.h): the planned TMA boxes encoded by the driver, the kernel compiled by the
// JIT at first use and launched on the device's current stream.
#include <cuda.h>

#include "device/cuda/context.h"
#include "device/cuda/launch.h"
#include "ops/gemm/gemm_sm90.h"
#include "ops/gemm/gemm_sm90_cuda.h"
#include "ops/gemm/gemm_sm90_tma_map.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

const cuda::CudaProgram& sm90_gemm_program() {
  static const cuda::CudaProgram p{"sol_sm90_gemm_tile", "#include \"kernels/cuda/sm90/sm90_gemm_tile_kernels.cuh\"\n",
                                   {}};
  return p;
}

namespace {

CUtensorMapSwizzle swizzle_of(kernels::sm90::Swizzle s) {
  switch (s) {
    case kernels::sm90::Swizzle::b128: return CU_TENSOR_MAP_SWIZZLE_128B;
    case kernels::sm90::Swizzle::b64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case kernels::sm90::Swizzle::b32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case kernels::sm90::Swizzle::none: break;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

}  // namespace

CUtensorMap encode_tensor_map(const cuda::Driver& d, const kernels::sm90::TmaBox& t, const char* op,
                              const char* operand) {
  cuuint64_t dims[kernels::sm90::kTmaMaxRank], strides[kernels::sm90::kTmaMaxRank];
  cuuint32_t box[kernels::sm90::kTmaMaxRank], element_strides[kernels::sm90::kTmaMaxRank];
  for (int i = 0; i < t.rank; ++i) {
    dims[i] = t.dims[i];
    box[i] = t.box[i];
    element_strides[i] = t.element_strides[i];
    if (i > 0) strides[i - 1] = t.strides_bytes[i];
  }
  const CUtensorMapDataType type = t.element_bytes == 4   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : t.element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  CUtensorMap map;
  const CUresult r = d.cuTensorMapEncodeTiled(&map, type, cuuint32_t(t.rank), reinterpret_cast<void*>(t.global_address),
                                              dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                              swizzle_of(t.swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail(op, "cuTensorMapEncodeTiled of ", operand, " failed: ", cuda::error_text(r));
  return map;
}

void gemm_sm90(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales, const Tensor* b_scales,
               Layout layout) {
  const Sm90GemmLaunch plan = plan_gemm_sm90(a, b, d, a_scales, b_scales, layout);
  if (!plan.kernel) return;
  const Device device = a.device();
  const CudaDeviceInfo& info = cuda_device(device.index);
  check(info.cc_major == 9, "gemm_sm90", device, " is ", info.name, " (", info.arch(), ") but the kernels need sm_90a");
  check(int(plan.launch.dynamic_shared_bytes) <= info.max_shared_per_block, "gemm_sm90", "the kernel needs ",
        plan.launch.dynamic_shared_bytes, " bytes of shared memory but ", device, " allows ", info.max_shared_per_block);
  const cuda::Driver& drv = cuda::use_device(device, "gemm_sm90");
  CUtensorMap map_a = encode_tensor_map(drv, plan.launch.a, "gemm_sm90", "a"),
              map_b = encode_tensor_map(drv, plan.launch.b, "gemm_sm90", "b"),
              map_d = encode_tensor_map(drv, plan.launch.d, "gemm_sm90", "d");
  cuda::LaunchShape shape;
  for (int i = 0; i < 3; ++i) {
    shape.grid[size_t(i)] = plan.launch.grid[i];
    shape.block[size_t(i)] = plan.launch.block[i];
    shape.cluster[size_t(i)] = plan.launch.cluster[i];
  }
  shape.dynamic_shared_bytes = plan.launch.dynamic_shared_bytes;
  const void* sa = a_scales ? a_scales->device_data() : nullptr;
  const void* sb = b_scales ? b_scales->device_data() : nullptr;
  unsigned m = unsigned(a.shape(0)), n = unsigned(d.shape(1)), k = unsigned(a.shape(1));
  void* plain[] = {&map_a, &map_b, &map_d, &m, &n, &k};
  void* scaled[] = {&map_a, &map_b, &map_d, &sa, &sb, &m, &n, &k};
  const cuda::Kernel kernel = cuda::get_kernel(sm90_gemm_program(), plan.kernel, device);
  cuda::launch(kernel, shape, current_stream(device), a_scales ? scaled : plain);
}

}  // namespace sol
