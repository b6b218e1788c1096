// CublasLtGemm (cublaslt_anchor.h) through libcublasLt opened with dlopen: cublasLt.h is read for
// its types and prototypes only, nothing links against the library, so a Sol binary loads where
// cuBLAS is absent (the anchor then names the reason) and no cudart is pulled in. cuBLASLt runs
// on the context current on the calling thread, which use_device makes the device's primary one.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "device/cuda/context.h"
#include "ops/gemm/cublaslt_anchor.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

constexpr const char* kOp = "cublaslt";
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what cuBLAS asks for on Hopper

#define SOL_CUBLASLT_ENTRY_POINTS(X)                                                                   \
  X(cublasLtGetVersion) X(cublasLtGetStatusString) X(cublasLtCreate) X(cublasLtDestroy)                \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)            \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)        \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                           \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct Table {
#define SOL_CUBLASLT_DECLARE(name) decltype(&::name) name = nullptr;
  SOL_CUBLASLT_ENTRY_POINTS(SOL_CUBLASLT_DECLARE)
#undef SOL_CUBLASLT_DECLARE
};

struct Loaded {
  CublasLtLibrary info;
  Table table;
};

// $SOL_CUBLASLT_LIBRARY, else the soname of the major version whose header Sol was built with
// (another major may change the ABI of the descriptors), else the unversioned name.
Loaded load() {
  Loaded l;
  const char* env = std::getenv("SOL_CUBLASLT_LIBRARY");
  const std::string versioned = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = nullptr;
  std::string tried;
  for (const std::string& name : env && *env ? std::vector<std::string>{env} : std::vector<std::string>{versioned, "libcublasLt.so"}) {
    lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.info.file = name;
      break;
    }
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + name + ": " + (e ? e : "not found");
  }
  if (!lib) {
    l.info.reason = "cannot load cuBLASLt (" + tried + ")";
    return l;
  }
#define SOL_CUBLASLT_RESOLVE(name)                                                          \
  l.table.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));                  \
  if (!l.table.name) {                                                                      \
    l.info.reason = l.info.file + " has no entry point " #name;                             \
    return l;                                                                               \
  }
  SOL_CUBLASLT_ENTRY_POINTS(SOL_CUBLASLT_RESOLVE)
#undef SOL_CUBLASLT_RESOLVE
  l.info.version = l.table.cublasLtGetVersion();
  if (l.info.version / 10000 != CUBLAS_VER_MAJOR) {
    l.info.reason = l.info.file + " is cuBLASLt " + l.info.version_text() + " but Sol was built with the headers of " +
                    std::to_string(CUBLAS_VER_MAJOR) + ".x";
    return l;
  }
  l.info.loaded = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

const Table& require_table() {
  const Loaded& l = loaded();
  if (!l.info.loaded) fail(kOp, l.info.reason);
  return l.table;
}

void check_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* text = loaded().table.cublasLtGetStatusString ? loaded().table.cublasLtGetStatusString(s) : nullptr;
  fail(kOp, what, " failed: ", text ? text : "status " + std::to_string(int(s)));
}

template <class T>
void set(const Table& t, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
         const char* what) {
  check_status(t.cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)), what);
}

}  // namespace

const CublasLtLibrary& cublaslt_library() { return loaded().info; }

struct CublasLtGemm::State {
  const Table* t = nullptr;
  Device device;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  DeviceBuffer workspace;

  ~State() {
    if (!t) return;
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l) t->cublasLtMatrixLayoutDestroy(l);
    if (desc) t->cublasLtMatmulDescDestroy(desc);
    if (handle) t->cublasLtDestroy(handle);
  }
};

CublasLtGemm::CublasLtGemm(Device device, const CublasLtProblem& p) : problem_(p), state_(std::make_unique<State>()) {
  check_cublaslt_problem(p);
  const Table& t = require_table();
  check(!device.is_cpu(), kOp, "the anchor runs on a CUDA device, not ", device);
  cuda::use_device(device, kOp);
  if (p.in == DType::f8e4m3) {
    const CudaDeviceInfo& info = cuda_device(device.index);
    const CublasLtFp8Scaling offered = cublaslt_fp8_scaling(cublaslt_library().version, info.cc_major, info.cc_minor);
    check(offered != CublasLtFp8Scaling::none, kOp, device, " is ", info.arch(), ": no fp8 tensor cores");
    check(p.scaling == CublasLtFp8Scaling::per_tensor || offered == p.scaling, kOp, "cuBLASLt ",
          cublaslt_library().version_text(), " on ", info.arch(), " offers fp8 ", cublaslt_fp8_scaling_name(offered),
          " scaling, not ", cublaslt_fp8_scaling_name(p.scaling));
  }
  State& s = *state_;
  s.t = &t;
  s.device = device;
  check_status(t.cublasLtCreate(&s.handle), "cublasLtCreate");
  check_status(t.cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Row-major D[m, n] = A[m, k] B[n, k]^T is column-major D'[n, m] = op(B') A' with B' the
  // weights as stored (k x n, transposed: the TN form), A' the activations (k x m). Layout nn's
  // B [k, n] is column-major n x k as stored: no transpose (NN).
  const bool nn = p.layout == Layout::nn;
  set(t, s.desc, CUBLASLT_MATMUL_DESC_TRANSA, nn ? CUBLAS_OP_N : CUBLAS_OP_T, "setting transa");
  set(t, s.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N, "setting transb");
  const cudaDataType in = p.in == DType::bf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  check_status(nn ? t.cublasLtMatrixLayoutCreate(&s.a, in, uint64_t(p.n), uint64_t(p.k), p.n)
                  : t.cublasLtMatrixLayoutCreate(&s.a, in, uint64_t(p.k), uint64_t(p.n), p.k),
               "layout of b");
  check_status(t.cublasLtMatrixLayoutCreate(&s.b, in, uint64_t(p.k), uint64_t(p.m), p.k), "layout of a");
  check_status(t.cublasLtMatrixLayoutCreate(&s.d, CUDA_R_16BF, uint64_t(p.n), uint64_t(p.m), p.n), "layout of d");
  if (p.scaling == CublasLtFp8Scaling::block_1x128_128x128) {
    set(t, s.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F),
        "setting the weights' 128x128 scale mode");
    set(t, s.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F),
        "setting the activations' 1x128 scale mode");
  }
  // In the block modes the heuristic is asked with the scale pointers set, to device buffers of the
  // scales' shapes in cuBLASLt's layouts (cublaslt_anchor.h): asked with them unset, it failed with
  // CUBLAS_STATUS_INVALID_VALUE for every fp8 block shape on an H100 (cuBLASLt 13.1), while
  // PyTorch's scaled_gemm, which sets them first (as NVIDIA's LtBlk128x128Fp8Matmul sample does),
  // ran the same scaling there (null means "scale 1" only in the scalar mode). run() points them at
  // the call's own scales. Slow accumulation (the default) promotes partial sums as DeepGEMM's
  // recipe does.
  s.workspace = DeviceBuffer(device, kWorkspaceBytes);
  std::optional<DeviceBuffer> query_a_scales, query_b_scales;
  if (p.scaling == CublasLtFp8Scaling::block_1x128_128x128) {
    const int64_t kb = p.k / kFp8ScaleBlock, nb = (p.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    query_b_scales.emplace(device, DType::f32, std::initializer_list<int64_t>{kb, p.m});
    query_a_scales.emplace(device, DType::f32, std::initializer_list<int64_t>{nb, (kb + 3) / 4 * 4});
    set(t, s.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, query_a_scales->device_data(), "setting b's scales");
    set(t, s.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, query_b_scales->device_data(), "setting a's scales");
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check_status(t.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  cublasStatus_t st = t.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                              sizeof(ws));
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = t.cublasLtMatmulAlgoGetHeuristic(s.handle, s.desc, s.a, s.b, s.d, s.d, pref, 1, &found, &count);
    // A configuration cuBLASLt has no kernel for (fp8 block scales at M = 1 on some versions)
    // answers NOT_SUPPORTED rather than success with no result: has_algorithm() says so, and
    // the caller may fall back (per-tensor scales), as for a count of 0.
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) st = CUBLAS_STATUS_SUCCESS, count = 0;
  }
  t.cublasLtMatmulPreferenceDestroy(pref);
  // Named in full: the record of a refused shape says what was asked for.
  const std::string query = "cublasLtMatmulAlgoGetHeuristic for " + describe() + " at m=" + std::to_string(p.m) +
                            " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
  check_status(st, query.c_str());
  s.has_algo = count > 0;
  s.algo = found.algo;
}

bool CublasLtGemm::has_algorithm() const { return state_ && state_->has_algo; }

CublasLtGemm::~CublasLtGemm() = default;
CublasLtGemm::CublasLtGemm(CublasLtGemm&&) noexcept = default;
CublasLtGemm& CublasLtGemm::operator=(CublasLtGemm&&) noexcept = default;

void CublasLtGemm::run(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales,
                       const Tensor* b_scales) const {
  check(state_ != nullptr, kOp, "run on a moved-from anchor");
  check_cublaslt_operands(problem_, a, b, d, a_scales, b_scales);
  const State& s = *state_;
  check(s.has_algo, kOp, "cuBLASLt ", cublaslt_library().version_text(), " has no algorithm for ", describe(),
        " at m=", problem_.m, " n=", problem_.n, " k=", problem_.k);
  check(a.device() == s.device, kOp, "operands are on ", a.device(), " but the anchor was prepared on ", s.device);
  cuda::use_device(s.device, kOp);
  if (problem_.scaling != CublasLtFp8Scaling::none) {
    // cuBLASLt's A is our B: the weights' scales go with A, the activations' with B.
    set(*s.t, s.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scales->device_data(), "setting b's scales");
    set(*s.t, s.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scales->device_data(), "setting a's scales");
  }
  const float alpha = 1.0f, beta = 0.0f;
  check_status(s.t->cublasLtMatmul(s.handle, s.desc, &alpha, b.device_data(), s.a, a.device_data(), s.b, &beta,
                                   d.device_data(), s.d, d.device_data(), s.d, &s.algo, s.workspace.device_data(),
                                   kWorkspaceBytes, static_cast<cudaStream_t>(current_stream(s.device))),
               "cublasLtMatmul");
}

std::string CublasLtGemm::describe() const {
  std::string s = "cuBLASLt " + cublaslt_library().version_text();
  if (problem_.in == DType::bf16) return s + (problem_.layout == Layout::nn ? " bf16 nn" : " bf16");
  return s + " fp8 " + std::string(cublaslt_fp8_scaling_name(problem_.scaling));
}

}  // namespace sol
