// `sol bench gemm --device cuda` through the registry: Sol's bf16 GEMM and the cuBLASLt anchor on
// the same shape, each checked against the fp64 reference on sampled rows and held to the device
// ceilings measured beside it (a SOL% in (0, 105]); the anchor's record names it in its shape.
#include <cstdio>
#include <map>
#include <string>

#include "gpu_test.h"
#include "sol/bench.h"
#include "sol/device.h"
#include "sol/registry.h"

namespace sol {

SOL_GPU_TEST(gemm_bench_case_on_device) {
  if (cuda_device(0).cc_major != 9) {
    const CudaDeviceInfo& info = cuda_device(0);
    std::printf("skipped: %s is %s, the kernels need sm_90a\n", info.name.c_str(), info.arch().c_str());
    return;
  }
  const OpInfo& op = find_op("gemm");
  for (const char* anchor : {"sol", "cublaslt"}) {
    const std::map<std::string, std::string> given{{"device", "cuda:0"}, {"dtype", "bf16"}, {"layout", "nt"},
                                                   {"m", "128"}, {"n", "7168"}, {"k", "2048"}, {"anchor", anchor}};
    BenchOptions opt;
    opt.run_check = true;
    opt.timing.min_seconds = 0.05;
    const BenchRecord r = bench_case(op, resolve_params(op, given), MachineProfile{}, opt);
    SOL_EXPECT(r.check && r.check->pass, anchor, " ", r.shape, ": ", r.check ? r.check->detail : "no check");
    SOL_EXPECT((r.shape.find("anchor=cuBLASLt") != std::string::npos) == (std::string(anchor) == "cublaslt"), r.shape);
    SOL_EXPECT(r.sol_pct > 0 && r.sol_pct <= 105, anchor, " ", r.shape, ": SOL ", r.sol_pct, "%");
    std::printf("gemm %s %s: %.1f TFLOP/s, SOL %.1f%% (%s bound)\n", r.shape.c_str(), r.dtype.c_str(), r.tflops,
                r.sol_pct, std::string(bound_name(r.floor.bound)).c_str());
  }
}

}  // namespace sol
