// The device GEMM benchmarks' argument checks and their cuBLASLt anchor (gemm_device_bench.h).
#include "ops/gemm/gemm_device_bench.h"

#include <algorithm>

#include "sol/error.h"

namespace sol {

DeviceGemmAnchor parse_device_gemm_anchor(const char* op, const std::string& text) {
  if (text == "none") return DeviceGemmAnchor::none;
  if (text == "cublaslt") return DeviceGemmAnchor::cublaslt;
  fail(op, "--anchor = '", text, "' but must be none or cublaslt");
}

ScaleFormat parse_gemm_scales(const char* op, const std::string& text, bool fp8) {
  check(text == "f32" || text == "ue8m0", op, "--scales = '", text, "' but must be f32 or ue8m0");
  check(fp8 || text == "f32", op, "--scales = ", text, " but only fp8 operands have scales (--dtype fp8)");
  return text == "ue8m0" ? ScaleFormat::ue8m0 : ScaleFormat::f32;
}

void check_device_gemm_arch(const char* op, Device d, int cc_major, int cc_minor, bool fp8) {
  const int cc = cc_major * 10 + cc_minor;
  check(!fp8 || cc >= 89, op, "--dtype fp8 on ", d, " (compute capability ", cc_major, ".", cc_minor,
        "): the device has no fp8 tensor cores (8.9 and later have them)");
  check(cc_major == 9, op, "on ", d, " (compute capability ", cc_major, ".", cc_minor,
        "): Sol's device GEMM and the wgmma loop of its floor are sm_90a (Hopper) kernels");
}

CublasLtFp8Scaling device_gemm_anchor_scaling(const char* op, const CublasLtLibrary& lib, int cc_major, int cc_minor,
                                              bool fp8) {
  check(lib.loaded, op, "--anchor cublaslt cannot run here: ", lib.reason);
  if (!fp8) return CublasLtFp8Scaling::none;
  const CublasLtFp8Scaling s = cublaslt_fp8_scaling(lib.version, cc_major, cc_minor);
  check(s != CublasLtFp8Scaling::none, op, "--anchor cublaslt cannot run fp8: cuBLASLt ", lib.version_text(),
        " has no fp8 on compute capability ", cc_major, ".", cc_minor);
  return s;
}

std::optional<CublasLtFp8Scaling> requested_anchor_scaling(const char* op, const std::string& anchor, Device d,
                                                           bool fp8) {
  if (parse_device_gemm_anchor(op, anchor) != DeviceGemmAnchor::cublaslt) return std::nullopt;
  const CudaDeviceInfo& info = cuda_device(d.index);
  return device_gemm_anchor_scaling(op, cublaslt_library(), info.cc_major, info.cc_minor, fp8);
}

void CublasLtAnchorCalls::add(int set, const Tensor& a_rows, const Tensor& b, const Tensor& d_rows,
                              const Tensor* a_scales, const Tensor* b_scales) {
  check(set >= 0, "cublaslt", "set = ", set, " but must be >= 0");
  if (sets_.size() <= size_t(set)) sets_.resize(size_t(set) + 1);
  const int64_t m = a_rows.shape(0);
  if (m == 0) return;
  CublasLtProblem problem{in_, m, b.shape(0), b.shape(1), scaling_};
  size_t g = 0;
  while (g < gemms_.size() && !(gemms_[g].problem().m == m && gemms_[g].problem().n == problem.n &&
                                gemms_[g].problem().k == problem.k))
    ++g;
  if (g == gemms_.size()) {
    CublasLtGemm gemm(device_, problem);
    // A shape block scaling has no kernel for (m = 1 on an H100) is timed with per-tensor scaling
    // and named so by describe(); a shape with no algorithm at all stays an error when run.
    if (!gemm.has_algorithm() && scaling_ == CublasLtFp8Scaling::block_1x128_128x128) {
      problem.scaling = CublasLtFp8Scaling::per_tensor;
      CublasLtGemm per_tensor(device_, problem);
      if (per_tensor.has_algorithm()) gemm = std::move(per_tensor);
    }
    gemms_.push_back(std::move(gemm));
  }
  const CublasLtFp8Scaling scaling = gemms_[g].problem().scaling;
  auto upload = [&](const Tensor& host) {
    scales_.push_back(std::make_unique<DeviceBuffer>(device_, host.dtype(), host.shape()));
    transfer(host, *scales_.back());
    return scales_.back().get();
  };
  Call call{g, a_rows, b, d_rows};
  if (scaling == CublasLtFp8Scaling::block_1x128_128x128) {
    check(a_scales && b_scales, "cublaslt", "block scaling needs Sol's a_scales and b_scales");
    call.a_scales = upload(cublaslt_a_block_scales(*a_scales));
    call.b_scales = upload(cublaslt_b_block_scales(*b_scales));
  } else if (scaling == CublasLtFp8Scaling::per_tensor) {
    Buffer one(DType::f32, {1, 1});
    *one.tensor().data_as<float>() = 1.0f;
    call.a_scales = upload(one);
    call.b_scales = upload(one);
  }
  sets_[size_t(set)].push_back(call);
}

void CublasLtAnchorCalls::run(int set) const {
  check(set >= 0 && size_t(set) < sets_.size(), "cublaslt", "set = ", set, " but ", sets_.size(), " were prepared");
  for (const Call& c : sets_[size_t(set)])
    gemms_[c.gemm].run(c.a, c.b, c.d, c.a_scales ? &c.a_scales->tensor() : nullptr,
                       c.b_scales ? &c.b_scales->tensor() : nullptr);
}

std::string CublasLtAnchorCalls::describe() const {
  if (gemms_.empty()) return "cuBLASLt (no rows to multiply)";
  size_t calls = 0;
  for (const auto& set : sets_) calls = std::max(calls, set.size());
  // Per-tensor stand-ins for shapes block scaling has no algorithm for are named with their m.
  std::string fallback;
  const CublasLtGemm* named = &gemms_.front();
  for (const CublasLtGemm& g : gemms_) {
    if (g.problem().scaling == scaling_) {
      named = &g;
      continue;
    }
    if (!fallback.empty()) fallback += ',';
    fallback += std::to_string(g.problem().m);
  }
  std::string text = named->describe();
  if (calls > 1) text += ", one call per expert";
  if (!fallback.empty()) text += " (per-tensor at m=" + fallback + ": no block-scaled algorithm)";
  return text;
}

}  // namespace sol
