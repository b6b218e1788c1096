// sol::gemm and the grouped GEMMs on device tensors: the options the persistent sm90 kernels
// implement go to them (gemm_sm90_persistent.h);
// the rest of the CPU API is a clear error naming what the device path lacks, never a silent
// fallback to the host.
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
  check(opt.layout == Layout::nt, op, "on ", a.device(),
        " b must be stored [N, K] (layout nt, as weights are); layout nn is not on the device yet");
  check(opt.alpha == 1.0f && opt.beta == 0.0f && opt.c == nullptr, op, "on ", a.device(),
        " alpha/beta/c are not supported yet (alpha = ", opt.alpha, ", beta = ", opt.beta, ")");
  check(opt.bias == nullptr && opt.activation == Activation::none, op, "on ", a.device(),
        " bias and activation epilogues are not supported yet");
  check(d.dtype() == DType::bf16, op, "on ", a.device(), " d must be bf16 (got ", dtype_name(d.dtype()), ")");
  gemm_sm90_persistent(kernels::sm90::GemmGrouping::single, a, b, d, nullptr, opt.a_scales, opt.b_scales, op);
}

bool grouped_on_device(const Tensor& a, const Tensor& b, const Tensor& d) { return gemm_on_device(a, b, d); }

void grouped_gemm_device(kernels::sm90::GemmGrouping grouping, const Tensor& a, const Tensor& b,
                         const Tensor& group_info, const Tensor& d, const GroupedGemmOptions& opt, const char* op) {
  gemm_sm90_persistent(grouping, a, b, d, &group_info, opt.a_scales, opt.b_scales, op);
}

}  // namespace sol
