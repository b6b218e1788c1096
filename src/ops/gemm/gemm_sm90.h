#pragma once
// The sm90 GEMM tile kernels (src/kernels/cuda/sm90/sm90_gemm_tile_kernels.cuh) on device
// tensors: D = A * B^T with A [m, k] and B [n, k] (rows contiguous, any row stride), both bf16
// or both f8e4m3, D bf16 [m, n] contiguous; or, with layout nn (bf16 only: fp8 wgmma reads K-major
// operands only), D = A * B with B [k, n]; with fp8, optionally DeepGEMM's block scales as the
// CPU GEMM takes them (a_scales f32 [m, k/128], b_scales f32 [ceil(n/128), k/128], contiguous).
// sol::gemm routes device operands here (gemm_device.cc) when their options are ones these
// kernels implement; the gpu test sm90_gemm_matches_cpu and scripts/device-check.sh call it too.
#include "kernels/cuda/sm90/sm90_gemm_launch.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

struct Sm90GemmLaunch {
  const char* kernel = nullptr;  // extern "C" name in sm90_gemm_tile_kernels.cuh
  kernels::sm90::GemmTileLaunch launch;
};

// Validates the arguments (sol::Error naming "gemm_sm90", the argument, expected and got) and
// computes the kernel, its TMA boxes and launch shape; no driver call (unit-tested without a
// GPU). m = 0 or n = 0 gives kernel = nullptr: nothing to launch.
Sm90GemmLaunch plan_gemm_sm90(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales = nullptr,
                              const Tensor* b_scales = nullptr, Layout layout = Layout::nt);

// Encodes the boxes with cuTensorMapEncodeTiled and launches on the device's current stream
// (CUDA backend only: sol::Error "built without CUDA" otherwise).
void gemm_sm90(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales = nullptr,
               const Tensor* b_scales = nullptr, Layout layout = Layout::nt);

}  // namespace sol
