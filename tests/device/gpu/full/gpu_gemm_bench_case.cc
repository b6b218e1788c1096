// `sol bench gemm|gemm-grouped --device cuda` through the registry: Sol's GEMM (bf16; fp8 with f32
// and UE8M0 scales) and its grouped GEMM (contiguous and masked), each with the cuBLASLt anchor on
// the same row, checked against the fp64 reference on sampled rows and held to the device ceilings
// measured beside it (a SOL% in (0, 105] for Sol and for the anchor, the fp8 floor from mma_fp8).
#include <cmath>
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
  using Case = std::map<std::string, std::string>;
  const std::pair<const char*, Case> cases[] = {
      {"gemm", {{"dtype", "bf16"}, {"layout", "nt"}, {"m", "128"}, {"n", "7168"}, {"k", "2048"}}},
      {"gemm", {{"dtype", "fp8"}, {"layout", "nt"}, {"m", "128"}, {"n", "7168"}, {"k", "2048"}}},
      {"gemm", {{"dtype", "fp8"}, {"layout", "nt"}, {"m", "17"}, {"n", "2112"}, {"k", "7168"}, {"scales", "ue8m0"}}},
      {"gemm-grouped", {{"dtype", "bf16"}, {"rows", "96,32,0,64,17,128,40,135"}, {"n", "7168"}, {"k", "2048"}}},
      {"gemm-grouped", {{"dtype", "fp8"}, {"rows", "96,32,0,64,17,128,40,135"}, {"n", "7168"}, {"k", "2048"}}},
      {"gemm-grouped",
       {{"dtype", "fp8"}, {"rows", "16,3,0,9,16,1,7,12"}, {"n", "7168"}, {"k", "2048"}, {"layout", "masked"}}},
  };
  for (const auto& [name, shape] : cases) {
    for (const char* anchor : {"none", "cublaslt"}) {
      Case given = shape;
      given["device"] = "cuda:0";
      given["anchor"] = anchor;
      const OpInfo& op = find_op(name);
      BenchOptions opt;
      opt.run_check = true;
      opt.timing.min_seconds = 0.05;
      const BenchRecord r = bench_case(op, resolve_params(op, given), MachineProfile{}, opt);
      const bool fp8 = given["dtype"] == "fp8";
      SOL_EXPECT(r.check && r.check->pass, name, " ", r.shape, ": ", r.check ? r.check->detail : "no check");
      SOL_EXPECT(r.cost.compute == (fp8 ? Unit::mma_fp8 : Unit::dot_bf16), name, " ", r.shape, ": compute unit ",
                 unit_name(r.cost.compute));
      SOL_EXPECT(r.sol_pct > 0 && r.sol_pct <= 105, name, " ", r.shape, ": SOL ", r.sol_pct, "%");
      SOL_EXPECT(r.anchor.has_value() == (std::string(anchor) == "cublaslt"), name, " ", r.shape, ": anchor ",
                 r.anchor ? r.anchor->name : "none");
      if (r.anchor) {
        SOL_EXPECT(r.anchor->name.find("cuBLASLt") == 0, r.anchor->name);
        SOL_EXPECT(!fp8 || r.anchor->name.find("fp8") != std::string::npos, r.anchor->name);
        SOL_EXPECT(r.anchor->sol_pct > 0 && r.anchor->sol_pct <= 105, r.anchor->name, ": SOL ", r.anchor->sol_pct, "%");
      }
      std::printf("%s %s %s: %.1f TFLOP/s, SOL %.1f%% (%s bound)", name, r.shape.c_str(), r.dtype.c_str(), r.tflops,
                  r.sol_pct, std::string(bound_name(r.floor.bound)).c_str());
      if (r.anchor)
        std::printf("; %s %.3f ms, SOL %.1f%%, Sol/anchor %.2fx", r.anchor->name.c_str(),
                    r.anchor->timing.median_s * 1e3, r.anchor->sol_pct, anchor_speedup(r));
      std::printf("\n");
    }
  }
}

}  // namespace sol
