#include "ops/common/compare.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "ops/common/case_operand.h"
#include "ops/common/fill.h"
#include "ops/common/validate.h"
#include "sol/quant.h"

namespace sol {

namespace {
struct Norms {
  double diff2 = 0, ref2 = 0;
  int64_t nan_mismatch = 0, first_bad = -1, bad = 0;
};

Norms accumulate(const Tensor& out, const Tensor& ref, bool bitwise, NanBits nan_bits = NanBits::exact) {
  Norms n;
  const size_t es = dtype_size(out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    double o = load_as_double(out.data(), out.dtype(), size_t(i));
    double r = load_as_double(ref.data(), ref.dtype(), size_t(i));
    bool differs = bitwise ? std::memcmp(out.data_as<const char>() + i * int64_t(es),
                                         ref.data_as<const char>() + i * int64_t(es), es) != 0
                           : (std::isnan(o) != std::isnan(r));
    if (nan_bits == NanBits::any && std::isnan(o) && std::isnan(r)) differs = false;
    if (std::isnan(o) || std::isnan(r)) {
      if (std::isnan(o) != std::isnan(r)) ++n.nan_mismatch;
    } else if (std::isinf(o) || std::isinf(r)) {
      if (o != r) ++n.nan_mismatch;  // an infinity must match exactly
    } else {
      n.diff2 += (o - r) * (o - r);
      n.ref2 += r * r;
    }
    if (differs || (!bitwise && (std::isinf(o) || std::isinf(r)) && o != r)) {
      if (n.first_bad < 0) n.first_bad = i;
      ++n.bad;
    }
  }
  return n;
}

double relative(const Norms& n) {
  if (n.ref2 > 0) return std::sqrt(n.diff2 / n.ref2);
  return std::sqrt(n.diff2);
}

void describe_first(std::ostringstream& os, const Tensor& out, const Tensor& ref, int64_t i) {
  os << "first at flat index " << i << ": got " << load_as_double(out.data(), out.dtype(), size_t(i))
     << ", expected " << load_as_double(ref.data(), ref.dtype(), size_t(i));
}
}  // namespace

CheckResult compare_bitwise(const Tensor& out, const Tensor& ref, NanBits nan_bits) {
  require_same_shape("compare", "out", out, "ref", ref);
  check(out.dtype() == ref.dtype() && out.is_contiguous() && ref.is_contiguous(), "compare",
        "bitwise comparison needs two contiguous tensors of one dtype");
  Norms n = accumulate(out, ref, true, nan_bits);
  CheckResult r;
  r.error = relative(n);
  r.tolerance = 0;
  r.pass = n.bad == 0;
  if (!r.pass) {
    std::ostringstream os;
    os << n.bad << " of " << out.numel() << " elements differ in their bits; ";
    describe_first(os, out, ref, n.first_bad);
    r.detail = os.str();
  }
  return r;
}

CheckResult compare_relative(const Tensor& out, const Tensor& ref, double tolerance) {
  require_same_shape("compare", "out", out, "ref", ref);
  check(out.is_contiguous() && ref.is_contiguous(), "compare", "needs contiguous tensors");
  Norms n = accumulate(out, ref, false);
  CheckResult r;
  r.error = relative(n);
  r.tolerance = tolerance;
  r.pass = n.nan_mismatch == 0 && r.error <= tolerance;
  if (!r.pass) {
    std::ostringstream os;
    if (n.nan_mismatch) {
      os << n.nan_mismatch << " NaN/Inf mismatches; ";
      describe_first(os, out, ref, n.first_bad);
    } else {
      os << "relative error " << r.error << " > tolerance " << tolerance;
    }
    r.detail = os.str();
  }
  return r;
}

CheckResult compare_quantized(const Tensor& q, const Tensor& scales, const Tensor& q_ref,
                              const Tensor& scales_ref) {
  CheckResult rs = compare_bitwise(scales, scales_ref);
  if (!rs.pass) return {false, rs.error, 0, "scales: " + rs.detail};
  return compare_bitwise(q, q_ref);
}

CheckResult check_fused_quant(Device device, int64_t rows, int64_t h,
                              const std::function<void(const Tensor& act)>& unfused,
                              const std::function<CheckResult(const Tensor& act)>& check_act,
                              const std::function<void()>& run_fused, const Tensor& q, const Tensor& scales) {
  CaseOperand act(device, DType::bf16, {rows, h});
  Buffer q_ref(DType::f8e4m3, {rows, h}), s_ref(DType::f32, {rows, h / 128});
  poison(act.host());
  act.upload();
  unfused(act);
  act.download();
  CheckResult ra = check_act(act.host());
  if (!ra.pass) return {false, ra.error, ra.tolerance, "the unfused op's bf16 output: " + ra.detail};
  quant_fp8_per_token(act.host(), q_ref, s_ref);
  poison(q);
  poison(scales);
  run_fused();
  return compare_quantized(q, scales, q_ref, s_ref);
}

}  // namespace sol
