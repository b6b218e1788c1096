// gemm_sm90_persistent (gemm_sm90_persistent.h): the plan's configuration compiled by the JIT at
// first use (one program per configuration, cached on disk by its text), the TMA boxes encoded,
// the persistent grid launched on the device's current stream, then the split-K reduction. The
// contiguous layout stays on the device: its kernel reports a bad row into a per-device word,
// read only by check_grouped_layouts.
#include <cuda.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "device/cuda/context.h"
#include "device/cuda/launch.h"
#include "ops/gemm/gemm_sm90_persistent_cuda.h"
#include "ops/gemm/gemm_sm90_tma_map.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/tuning.h"

namespace sol {

namespace {

using namespace kernels::sm90;

Sm90Target target_of(const CudaDeviceInfo& info) {
  Sm90Target t = Sm90Target::h200();
  t.sms = uint32_t(info.sm_count);
  t.smem_per_block = uint32_t(info.max_shared_per_block);
  t.unproven = tuning().device.sm90_unproven;
  return t;
}

// The split-K workspace of (device, stream), at least `bytes`: kept across calls, because a
// cuMemAlloc and the cuMemFree after the reduction (which waits for the device) cost more than a
// decode-sized GEMM. Calls on one stream run in order, so the next call's partials cannot
// overwrite this call's before its reduction has read them. A stream handle is only reused by
// the driver once the destroyed stream's work is done. A buffer that grows is retired, not
// freed: another host thread on the same stream may hold it between its lookup and its launch
// (a lock across the launch would wait behind any kernel's first compile). It grows at least
// twofold, so the retired ones stay under the live one's size. Never freed: the process's exit
// returns them.
float* split_workspace(Device device, void* stream, uint64_t bytes) {
  static std::mutex mutex;
  static auto* buffers = new std::map<std::pair<int, void*>, DeviceBuffer>;
  static auto* retired = new std::vector<DeviceBuffer>;
  std::lock_guard<std::mutex> lock(mutex);
  DeviceBuffer& buffer = (*buffers)[{device.index, stream}];
  if (buffer.bytes() < bytes) {
    DeviceBuffer grown(device, std::max<uint64_t>(bytes, 2 * uint64_t(buffer.bytes())));
    if (buffer.bytes()) retired->push_back(std::move(buffer));
    buffer = std::move(grown);
  }
  return static_cast<float*>(buffer.device_data());
}

// The contiguous kernels' layout report on `device` (one word: layout_error_key of the first
// bad row, kNoLayoutError when none), made and cleared once per process with a synchronous
// copy; every contiguous launch on the device, on any stream, reports into it by atomicMin.
struct LayoutReport {
  std::mutex mutex;
  std::map<int, DeviceBuffer> words;
};
LayoutReport& layout_report() {
  static auto* r = new LayoutReport;  // lives as long as the primary contexts
  return *r;
}
void set_report(const DeviceBuffer& word, unsigned long long value) {
  transfer(Tensor(&value, DType::u8, {int64_t(sizeof value)}), word);
}
unsigned long long* layout_report_word(Device device) {
  LayoutReport& r = layout_report();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.words.find(device.index);
  if (it == r.words.end()) {
    DeviceBuffer word(device, DType::u8, {int64_t(sizeof(unsigned long long))});
    set_report(word, kNoLayoutError);
    it = r.words.emplace(device.index, std::move(word)).first;
  }
  return static_cast<unsigned long long*>(it->second.device_data());
}

}  // namespace

void check_sm90_contiguous_layouts(Device device, const char* op) {
  check(!device.is_cpu(), op, "the layout report is a device's");
  const CudaDiscovery& found = cuda_discovery();
  check(device.index < int(found.devices.size()), op, device, " but ",
        found.reason.empty() ? "this machine has fewer devices" : found.reason);
  // Every stream of the device, not only the current one: any contiguous launch reports into
  // the one word, and one still running on another stream could report after the read.
  const cuda::Driver& drv = cuda::use_device(device, op);
  cuda::check_cu(drv.cuCtxSynchronize(), op, "cuCtxSynchronize");
  LayoutReport& r = layout_report();
  unsigned long long key = kNoLayoutError;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.words.find(device.index);
    if (it == r.words.end()) return;  // no contiguous GEMM has run there
    transfer(it->second, Tensor(&key, DType::u8, {int64_t(sizeof key)}));
    if (key != kNoLayoutError) set_report(it->second, kNoLayoutError);
  }
  check(key == kNoLayoutError, op, "a grouped_gemm_contiguous on ", device, " met grouped_layout[",
        layout_error_row(key), "] = ", layout_error_value(key),
        ", but each value must be -1 or an expert of b, and every row of a tile (the kernel's 64 or 128 rows) -1 "
        "or the expert of the tile's first row (pad each expert's rows to ",
        kGroupedGemmMAlignment, "): that row of d was not written");
}

cuda::CudaProgram sm90_persistent_program(const Sm90PersistentPlan& plan) {
  cuda::CudaProgram p;
  p.name = plan.kernel;
  p.source = "#include \"kernels/cuda/sm90/sm90_gemm_persistent_kernels.cuh\"\n" + plan.instantiation +
             "\nSOL_SM90_SPLIT_REDUCE_KERNEL(" + std::to_string(plan.config.block_m) + ")\n";
  return p;
}

void gemm_sm90_persistent(GemmGrouping grouping, const Tensor& a, const Tensor& b, const Tensor& d,
                          const Tensor* group_info, const Tensor* a_scales, const Tensor* b_scales, const char* op,
                          const Sm90Epilogue& epilogue, Layout b_layout) {
  const Device device = a.device();
  check(!device.is_cpu(), op, "a is on the host but the sm90 kernels need device memory");
  const CudaDiscovery& found = cuda_discovery();
  check(device.index < int(found.devices.size()), op, "operands are on ", device, " but ",
        found.reason.empty() ? "this machine has fewer devices" : found.reason);
  const CudaDeviceInfo& info = cuda_device(device.index);
  check(info.cc_major == 9, op, device, " is ", info.name, " (", info.arch(), ") but the kernels need sm_90a");
  Sm90PersistentPlan plan = plan_gemm_sm90_persistent(grouping, a, b, d, group_info, a_scales, b_scales,
                                                       target_of(info), op, epilogue, b_layout,
                                                       tuning().device.sm90_gemm_config);
  if (plan.kernel.empty()) return;
  const cuda::Driver& drv = cuda::use_device(device, op);
  CUtensorMap map_a = encode_tensor_map(drv, plan.a, op, "a"), map_b = encode_tensor_map(drv, plan.b, op, "b"),
              map_d = encode_tensor_map(drv, plan.d, op, "d");
  void* stream = current_stream(device);
  PersistentGemmArgs args;
  args.problem = plan.problem;
  if (grouping == GemmGrouping::contiguous) {
    args.problem.row_group = static_cast<const int*>(group_info->device_data());
    args.layout_error = layout_report_word(device);
  }
  if (grouping == GemmGrouping::masked) args.problem.masked_m = static_cast<const int*>(group_info->device_data());
  args.rows = plan.rows;
  args.epilogue = plan.epilogue;
  args.workspace = plan.workspace_bytes ? split_workspace(device, stream, plan.workspace_bytes) : nullptr;
  args.scales_a = a_scales ? static_cast<const float*>(a_scales->device_data()) : nullptr;
  args.scales_b = b_scales ? static_cast<const float*>(b_scales->device_data()) : nullptr;

  const cuda::CudaProgram program = sm90_persistent_program(plan);
  cuda::LaunchShape shape;
  shape.grid[0] = plan.ctas;
  shape.block[0] = plan.config.threads;
  shape.cluster[0] = plan.config.cluster_m;  // the CTAs of a cluster share B's stages (multicast)
  shape.dynamic_shared_bytes = plan.config.smem_bytes;
  void* gemm_args[] = {&map_a, &map_b, &map_d, &args};
  cuda::launch(cuda::get_kernel(program, plan.kernel.c_str(), device), shape, stream, gemm_args);
  if (plan.config.split_k > 1) {
    cuda::LaunchShape reduce;
    reduce.block[0] = 256;
    reduce.grid[0] = unsigned(std::min<uint64_t>((uint64_t(plan.rows) * (plan.problem.n / 2) + 255) / 256,
                                                 uint64_t(info.sm_count) * 8));
    void* reduce_args[] = {&args};
    cuda::launch(cuda::get_kernel(program, "sol_sm90_gemm_split_reduce", device), reduce, stream, reduce_args);
  }
}

}  // namespace sol
