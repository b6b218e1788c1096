#pragma once
// The persistent sm90 GEMM (src/kernels/cuda/sm90/sm90_gemm_persistent*.cuh) on device tensors,
// for sol::gemm and the MoE grouped GEMMs: the configuration chooser (sm90_gemm_config.h) picks
// tile, stages and split-K for the shape on the device's SMs; plan_* checks the arguments and
// computes the kernel, its JIT instantiation, TMA boxes, grid and split-K workspace with no
// driver call (unit-tested without a GPU); gemm_sm90_persistent encodes and launches.
//
// Shapes (B K-major, weights as stored; D bf16 or f32, contiguous):
//   single      a [m, k], b [n, k], d [m, n]; with b_layout nn (bf16 only: fp8 wgmma reads
//               K-major operands only) b [k, n], read MN-major by the kernel

//   contiguous  a [M, k], b [G, n, k], group_info int32 [M] (expert of each row, -1 padding),
//               d [M, n]; read on the device only: the kernel checks each row against
//               GemmTileScheduler::layout_row_ok and reports the first bad one
//               (check_grouped_layouts); the chooser models the rows as contiguous_rows_model
//   masked      a [G, m, k], b [G, n, k], group_info int32 [G] = masked_m (read on the device;
//               values past m act as m), d [G, m, n]
// fp8 block scales: a_scales f32 [rows of a, k/128] ([G, m, k/128] for masked); b_scales f32
// [G, ceil(n/128), k/128]
// ([ceil(n/128), k/128] for single).
// Epilogue (sol::gemm's, sm90_gemm_epilogue.h): D = act(alpha * A B^T + beta * C + bias); C has
// D's shape and dtype (null: D's old contents, in place), read only when beta != 0; bias f32 [n].
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/sm90/sm90_gemm_config.h"
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

struct Sm90Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  const Tensor* c = nullptr;
  const Tensor* bias = nullptr;
  bool silu = false;
};

struct Sm90PersistentPlan {
  std::string kernel;         // extern "C" symbol; empty: nothing to compute
  std::string instantiation;  // its SOL_SM90_PERSISTENT_KERNEL line
  kernels::sm90::GemmKernelKind kind = kernels::sm90::GemmKernelKind::bf16;
  kernels::sm90::Sm90GemmConfig config;
  kernels::sm90::TmaBox a, b, d;  // d: the TMA-store epilogue's box over D [rows, n]
  kernels::sm90::GemmProblemView problem;  // device pointers filled by the launcher
  uint32_t rows = 0;                        // rows of a and d
  uint32_t ctas = 0;                        // persistent grid, whole clusters of config.cluster_m
  uint64_t workspace_bytes = 0;             // split-K partials
  kernels::sm90::GemmEpilogueParams epilogue;  // D, C, bias as device addresses
};

// The contiguous layout's rows per group as the chooser models them (the layout itself is never
// read on the host): m rows in 128-row blocks spread evenly over min(groups, blocks) groups.
std::vector<int64_t> contiguous_rows_model(int64_t m, int64_t groups);

// forced_config_spec: empty, the chooser's configuration; else forced_config's spec (the
// launcher passes the tuning context's DeviceTuning::sm90_gemm_config, $SOL_SM90_GEMM_CONFIG).
Sm90PersistentPlan plan_gemm_sm90_persistent(kernels::sm90::GemmGrouping grouping, const Tensor& a, const Tensor& b,
                                             const Tensor& d, const Tensor* group_info, const Tensor* a_scales,
                                             const Tensor* b_scales, const kernels::sm90::Sm90Target& target,
                                             const char* op,
                                             const Sm90Epilogue& epilogue = {}, Layout b_layout = Layout::nt,
                                             const std::string& forced_config_spec = {});

// Plans on the operands' device and launches on its current stream (CUDA backend only).
// tuning().device.sm90_gemm_config ($SOL_SM90_GEMM_CONFIG, read once), when set, names the
// configuration instead of the chooser (every call then uses it, and a shape it does not fit is
// a sol::Error). No call reads data on the host or waits for the device. Split-K partials go to a
// workspace kept per device and stream (grown on demand), so a call neither allocates nor
// waits for the device once the workspace is large enough.
void gemm_sm90_persistent(kernels::sm90::GemmGrouping grouping, const Tensor& a, const Tensor& b, const Tensor& d,
                          const Tensor* group_info, const Tensor* a_scales, const Tensor* b_scales, const char* op,
                          const Sm90Epilogue& epilogue = {}, Layout b_layout = Layout::nt);

// check_grouped_layouts (sol/gemm.h) on a CUDA device: waits for all its streams, reads and
// clears the contiguous kernels' layout report, throws sol::Error naming the first bad row.
void check_sm90_contiguous_layouts(Device device, const char* op);

}  // namespace sol
