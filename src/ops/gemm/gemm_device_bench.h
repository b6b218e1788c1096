#pragma once
// What `sol bench gemm|gemm-grouped --device cuda[:N]` takes beyond the shape, checked on the host
// so each refusal is a sol::Error with or without a GPU (tests/device/test_gemm_device_case.cc):
// the anchor's name, the fp8 scale kind, whether the device runs Sol's kernels in the dtype, which
// cuBLASLt fp8 scaling the anchor can use; and the anchor's calls themselves (gemm_device_bench.cc).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/gemm/cublaslt_anchor.h"
#include "sol/device.h"
#include "sol/quant.h"

namespace sol {

// --anchor: none, or cublaslt (cuBLASLt on the same operands, beside Sol on one row).
enum class DeviceGemmAnchor { none, cublaslt };
DeviceGemmAnchor parse_device_gemm_anchor(const char* op, const std::string& text);

// --scales: f32 or ue8m0 (how the activations' 1 x 128 and the weights' 128 x 128 scales are
// rounded by quant_fp8_*; both are f32 in memory). Only fp8 has scales: anything but the default
// f32 on another dtype is an error.
ScaleFormat parse_gemm_scales(const char* op, const std::string& text, bool fp8);

// sol::Error unless a device of compute capability cc_major.cc_minor runs Sol's device GEMM:
// fp8 needs fp8 tensor cores (8.9 and later) before anything else, and Sol's kernels are sm_90a
// (wgmma, TMA), as is the wgmma loop that measures their peak.
void check_device_gemm_arch(const char* op, Device d, int cc_major, int cc_minor, bool fp8);

// The scaling cuBLASLt gets for an fp8 anchor (none for bf16): its 1x128/128x128 block scales
// where `lib` offers them on this device, per-tensor otherwise. sol::Error naming the op and
// --anchor when the library is not loaded or the device has no fp8 for it.
CublasLtFp8Scaling device_gemm_anchor_scaling(const char* op, const CublasLtLibrary& lib, int cc_major, int cc_minor,
                                              bool fp8);

// What `--anchor` asks of a case on device d: the cuBLASLt scaling (as above) for cublaslt,
// nothing for none; the errors are those of parse_device_gemm_anchor and the function above.
std::optional<CublasLtFp8Scaling> requested_anchor_scaling(const char* op, const std::string& anchor, Device d,
                                                           bool fp8);

// The anchor of one case: for each input set, one cuBLASLt call per non-empty group of rows (a
// plain GEMM has one), each over rows [start, start + m) of A and D with one expert's weights.
// A problem (m, n, k) is prepared once (descriptors, heuristic, workspace) and shared by every set
// and call of its shape; scales are copied into cuBLASLt's layout and uploaded in add(), never
// inside a timed run. Per-tensor scaling gets scales of 1: a different product from Sol's, named
// so by describe().
class CublasLtAnchorCalls {
 public:
  CublasLtAnchorCalls(Device device, DType in, CublasLtFp8Scaling scaling) : device_(device), in_(in), scaling_(scaling) {}
  // a_rows [m, k], d_rows [m, n] and b [n, k] on the device; a_scales (f32 [m, k/128]) and
  // b_scales (f32 [ceil(n/128), k/128]) on the host in Sol's layout, fp8 only. m = 0 adds nothing.
  void add(int set, const Tensor& a_rows, const Tensor& b, const Tensor& d_rows, const Tensor* a_scales,
           const Tensor* b_scales);
  void run(int set) const;
  // "cuBLASLt 13.1.0 fp8 block 1x128/128x128" (", one call per expert" where a set has several).
  std::string describe() const;

 private:
  struct Call {
    size_t gemm;
    Tensor a, b, d;
    const DeviceBuffer* a_scales = nullptr;
    const DeviceBuffer* b_scales = nullptr;
  };
  Device device_;
  DType in_;
  CublasLtFp8Scaling scaling_;
  std::vector<CublasLtGemm> gemms_;
  std::vector<std::vector<Call>> sets_;
  std::vector<std::unique_ptr<DeviceBuffer>> scales_;  // stable addresses for the calls
};

}  // namespace sol
