// sol::gemm and the grouped GEMMs on device tensors: the options the persistent sm90 kernels
// implement (the whole epilogue, bf16 or f32 D, B stored [N, K] or, for bf16, [K, N]) go to them
// (gemm_sm90_persistent.h); the rest of the CPU API (fp8 layout nn, bf16 x fp8) is a clear error
// naming what the device path lacks, never a silent fallback to the host.
#include "ops/gemm/gemm_device.h"

#include "ops/gemm/gemm_sm90_persistent.h"
#include "sol/error.h"

namespace sol {

bool gemm_on_device(const Tensor& a, const Tensor& b, const Tensor& d) {
  return !a.device().is_cpu() || !b.device().is_cpu() || !d.device().is_cpu();
}

void gemm_device(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt) {
  const char* op = "gemm";
  check(a.device() == b.device() && a.device() == d.device(), op, "a, b, d are on ", a.device(), ", ",
        b.device(), ", ", d.device(), " but must share one device (sol::transfer moves a tensor)");
  // fp8 wgmma reads both operands K-major from shared memory, so an fp8 B [K, N] would need a
  // transpose pass first (an extra read and write of B per call; docs/perf/gpu.md); a bf16 B
  // [K, N] is read MN-major by the wgmma itself.
  check(opt.layout == Layout::nt || b.dtype() != DType::f8e4m3, op, "on ", a.device(),
        " an f8e4m3 b must be stored [N, K] (layout nt): fp8 wgmma reads K-major operands only");
  check(!(a.dtype() == DType::bf16 && b.dtype() == DType::f8e4m3), op, "on ", a.device(),
        " bf16 x f8e4m3 (weight-only fp8) is not on the device yet: quantize a (quant_fp8) or widen b");
  Sm90Epilogue epilogue;
  epilogue.alpha = opt.alpha;
  epilogue.beta = opt.beta;
  epilogue.c = opt.c;
  epilogue.bias = opt.bias;
  epilogue.silu = opt.activation == Activation::silu;
  gemm_sm90_persistent(kernels::sm90::GemmGrouping::single, a, b, d, nullptr, opt.a_scales, opt.b_scales, op,
                       epilogue, opt.layout);
}

bool grouped_on_device(const Tensor& a, const Tensor& b, const Tensor& d) { return gemm_on_device(a, b, d); }

void grouped_gemm_device(kernels::sm90::GemmGrouping grouping, const Tensor& a, const Tensor& b,
                         const Tensor& group_info, const Tensor& d, const GroupedGemmOptions& opt, const char* op) {
  gemm_sm90_persistent(grouping, a, b, d, &group_info, opt.a_scales, opt.b_scales, op);
}

}  // namespace sol
