#pragma once
// cuBLASLt as the anchor of Sol's device GEMM (issue 23): D[m, n] bf16 = A[m, k] · B[n, k]^T,
// B stored [N, K] as weights are (layout nt), bf16 or fp8 e4m3 operands, f32 accumulation.
//
// The library is reached through dlopen (cublaslt_library_cuda.cc), never linked: a Sol binary
// must load and run on a machine with no driver or no cuBLAS, where the anchor then says why it
// cannot run. Everything here except CublasLtGemm's constructor and run() is host logic, tested
// without a GPU.
//
// FP8 scaling. DeepGEMM's recipe scales A per 1 x 128 (row, K block) and B per 128 x 128 block.
// cuBLASLt offers exactly that as CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F (A) and
// BLK128x128_32F (B) from cuBLAS 12.9, on sm_90 only (NVIDIA, CUDALibrarySamples issue 310);
// elsewhere fp8 has one f32 scale per tensor, a different (cheaper) product, and every output
// that times it names it "per-tensor".
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

enum class CublasLtFp8Scaling {
  none,                 // no fp8 on this device or library
  per_tensor,           // CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: one scale for A, one for B
  block_1x128_128x128,  // VEC128_32F for A, BLK128x128_32F for B: DeepGEMM's recipe
};
std::string_view cublaslt_fp8_scaling_name(CublasLtFp8Scaling s);  // "none", "per-tensor", "block 1x128/128x128"

// The fp8 scaling cuBLASLt `version` (cublasLtGetVersion(): 130100 for 13.1.0) offers on a device
// of compute capability cc_major.cc_minor: block scales from 12.9 on 9.0, per-tensor on 8.9 and
// later (fp8 tensor cores), none before.
CublasLtFp8Scaling cublaslt_fp8_scaling(size_t version, int cc_major, int cc_minor);

// The library as loaded here: its version and file, or why it is not there.
struct CublasLtLibrary {
  bool loaded = false;
  size_t version = 0;   // 130100 for 13.1.0
  std::string file;     // what dlopen opened
  std::string reason;   // why not, when !loaded
  std::string version_text() const;  // "13.1.0"
};
const CublasLtLibrary& cublaslt_library();  // loaded once per process; "built without CUDA" otherwise

// Sol's block scales in the layouts cuBLASLt's block modes read (host buffers; the caller uploads
// them once, outside any timed run). a_scales f32 [m, k/128] (Sol's, per row) -> [k/128, m]:
// the rows of one K block side by side. b_scales f32 [ceil(n/128), k/128] -> [ceil(n/128),
// round_up(k/128, 4)]: each N block's K blocks padded to 16 bytes, padding zero.
Buffer cublaslt_a_block_scales(const Tensor& a_scales);
Buffer cublaslt_b_block_scales(const Tensor& b_scales);

// The problem an anchor is prepared for.
struct CublasLtProblem {
  DType in = DType::bf16;  // A and B: bf16 or f8e4m3; D is bf16
  int64_t m = 0, n = 0, k = 0;
  CublasLtFp8Scaling scaling = CublasLtFp8Scaling::none;  // none for bf16
  // nt: B [N, K] (TN in cuBLASLt's terms); nn (bf16 only: its fp8 kernels take TN alone): B
  // [K, N], stated as column-major D^T = B' A' with both untransposed (NN).
  Layout layout = Layout::nt;
};
// sol::Error naming "cublaslt" and the argument for a problem the anchor cannot state (a dtype
// other than bf16/e4m3, a scaling that does not fit the dtype, empty or misaligned dimensions).
void check_cublaslt_problem(const CublasLtProblem& p);
// sol::Error for operands that do not match the prepared problem: shapes, dtypes, one CUDA
// device, contiguity, and the scale tensors the scaling needs in cuBLASLt's layout (block:
// [k/128, m] and [ceil(n/128), round_up(k/128, 4)]; per-tensor: one f32 each; bf16: none); b is
// [n, k], or [k, n] for layout nn.
void check_cublaslt_operands(const CublasLtProblem& p, const Tensor& a, const Tensor& b, const Tensor& d,
                             const Tensor* a_scales, const Tensor* b_scales);

// One problem prepared once: matmul descriptor, layouts (the row-major product stated as
// cuBLASLt's column-major D^T = B · A^T, transa = T: the TN form its fp8 kernels need), the
// heuristic's first algorithm and a 32 MiB workspace on `device`. run() enqueues one matmul on the
// device's current stream (sol::current_stream), as Sol's ops do. sol::Error when the library or
// the device is missing, naming which; a problem without an algorithm is has_algorithm() false.
class CublasLtGemm {
 public:
  CublasLtGemm(Device device, const CublasLtProblem& p);
  ~CublasLtGemm();
  CublasLtGemm(CublasLtGemm&&) noexcept;
  CublasLtGemm& operator=(CublasLtGemm&&) noexcept;

  void run(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales = nullptr,
           const Tensor* b_scales = nullptr) const;
  const CublasLtProblem& problem() const { return problem_; }
  // Whether the heuristic found an algorithm for the problem. A shape the library's kernels do not
  // take (block-scaled fp8 refused m = 1 on an H100 through PyTorch too) is not an error here: the
  // caller names what it does instead (per-tensor scaling, or the reason); run() on such a problem
  // is a sol::Error saying so.
  bool has_algorithm() const;
  // "cuBLASLt 13.1.0 bf16" / "cuBLASLt 13.1.0 fp8 block 1x128/128x128" / "... fp8 per-tensor"
  std::string describe() const;

 private:
  struct State;
  CublasLtProblem problem_;
  std::unique_ptr<State> state_;
};

}  // namespace sol
