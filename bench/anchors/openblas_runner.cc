// OpenBLAS anchor: cblas_sgemm on the plain row-major operands (BLAS has no pre-packed weights),
// and cblas_sbgemm for bf16 when the library exports it (Debian's 0.3.21 declares it in cblas.h
// but builds without it, so it is looked up at run time rather than linked).
#include "runners.h"

#if SOL_ANCHORS_HAVE_OPENBLAS

#include <cblas.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sol/hw.h"

namespace sol_bench {

namespace {

using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const uint16_t*, blasint, const uint16_t*, blasint, float, float*, blasint);

SbgemmFn find_sbgemm() { return reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm")); }

class OpenblasRunner : public GemmRunner {
 public:
  OpenblasRunner(const GemmCase& c, SbgemmFn sbgemm) : c_(c), sbgemm_(sbgemm) {
    // sbgemm writes f32; sgemm writes D's own dtype (f32).
    d_.resize(size_t(c.sets));
    for (int s = 0; s < c.sets; ++s)
      for (int g = 0; g < c.groups(); ++g)
        d_[size_t(s)].push_back(c.m(g) == 0 ? sol::Buffer()
                                            : sol::Buffer(sol::DType::f32, {c.m(g), c.shape.n}));
  }

  void run(int set) override {
    const size_t s = size_t(set);
    const bool nt = c_.shape.layout == sol::Layout::nt;
    const blasint n = blasint(c_.shape.n), k = blasint(c_.shape.k);
    const blasint ldb = nt ? k : n;
    const CBLAS_TRANSPOSE tb = nt ? CblasTrans : CblasNoTrans;
    for (int g = 0; g < c_.groups(); ++g) {
      const blasint m = blasint(c_.m(g));
      if (m == 0) continue;
      const sol::Buffer &a = c_.a[s][size_t(g)], &b = c_.b[s][size_t(g)];
      float* d = static_cast<float*>(d_[s][size_t(g)].data());
      if (sbgemm_)
        sbgemm_(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, static_cast<const uint16_t*>(a.data()), k,
                static_cast<const uint16_t*>(b.data()), ldb, 0.0f, d, n);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, static_cast<const float*>(a.data()), k,
                    static_cast<const float*>(b.data()), ldb, 0.0f, d, n);
    }
  }

  sol::Tensor output(int g) const override { return d_[0][size_t(g)].tensor(); }
  std::string detail() const override { return sbgemm_ ? "cblas_sbgemm" : "cblas_sgemm"; }

 private:
  const GemmCase& c_;
  SbgemmFn sbgemm_;
  std::vector<std::vector<sol::Buffer>> d_;
};

}  // namespace

std::unique_ptr<GemmRunner> make_openblas_runner(const GemmCase& c, std::string* why_not) {
  if (c.in == sol::DType::f32 && c.out == sol::DType::f32) return std::make_unique<OpenblasRunner>(c, nullptr);
  if (c.in == sol::DType::bf16) {
    if (SbgemmFn f = find_sbgemm()) return std::make_unique<OpenblasRunner>(c, f);
    *why_not = "cblas_sbgemm not exported by this OpenBLAS";
    return nullptr;
  }
  *why_not = "OpenBLAS has no GEMM for this dtype";
  return nullptr;
}

void set_openblas_threads(int threads) { openblas_set_num_threads(threads); }

std::string openblas_description() {
  std::string s = std::string(openblas_get_config()) + "; core " + openblas_get_corename();
  s += find_sbgemm() ? "; cblas_sbgemm present" : "; no cblas_sbgemm";
  return s;
}

namespace {
// OpenBLAS writes its own choice into OPENBLAS_CORETYPE when it loads, so getenv cannot tell
// whether the user set it: the environment this process started with can.
bool coretype_set_at_start() {
  std::ifstream env("/proc/self/environ", std::ios::binary);
  for (std::string var; std::getline(env, var, '\0');)
    if (var.rfind("OPENBLAS_CORETYPE=", 0) == 0) return true;
  return false;
}
}  // namespace

void openblas_select_core(const std::string& core, char** argv) {
  // The marker stops a second re-execution when OpenBLAS does not take the name.
  if (core == "native" || std::getenv("SOL_GEMM_ANCHORS_REEXEC")) return;
  std::string name = core;
  if (name == "auto") {
    if (coretype_set_at_start()) return;
    const sol::CpuFeatures& f = sol::cpu_features();
    if (f.avx512_bf16 && f.os_avx512) name = "Cooperlake";
    else if (f.avx512f && f.os_avx512) name = "SkylakeX";
    else return;
  }
  if (name == openblas_get_corename()) return;
  setenv("OPENBLAS_CORETYPE", name.c_str(), 1);
  setenv("SOL_GEMM_ANCHORS_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "gemm_anchors: could not re-execute with OPENBLAS_CORETYPE=%s; OpenBLAS keeps %s\n",
               name.c_str(), openblas_get_corename());
}

}  // namespace sol_bench

#else

namespace sol_bench {
std::unique_ptr<GemmRunner> make_openblas_runner(const GemmCase&, std::string* why_not) {
  *why_not = "not built (OpenBLAS not found)";
  return nullptr;
}
void set_openblas_threads(int) {}
std::string openblas_description() { return "OpenBLAS: not built"; }
void openblas_select_core(const std::string&, char**) {}
}  // namespace sol_bench

#endif
