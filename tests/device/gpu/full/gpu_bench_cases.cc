// The registry's cases on a device: the check tables of copy, cast and the memory-bound ops
// (rope, softmax, moe-routing, moe-permute, embedding) with --device cuda must pass against their
// CPU references, and `sol bench` must time a device case with events and
// hold it to device ceilings measured beside it (a SOL% in (0, 105]).
#include <cmath>
#include <map>
#include <string>

#include "gpu_test.h"
#include "sol/bench.h"
#include "sol/device.h"
#include "sol/registry.h"

namespace sol {

SOL_GPU_TEST(registry_cases_on_device) {
  // moe-routing's device path scores with sigmoid and takes at most 256 experts; dequantization
  // has no device path yet (docs/gpu.md).
  const auto device_lacks = [](const std::string& op, const std::map<std::string, std::string>& given) {
    const auto is = [&](const char* k, const char* v) { return given.count(k) && given.at(k) == v; };
    return (op == "moe-routing" && (is("scoring", "softmax") || is("experts", "512"))) ||
           (op == "quant-fp8" && is("mode", "dequant"));
  };
  for (const char* name : {"copy", "cast", "rmsnorm", "quant-fp8", "silu-mul", "gelu", "rope", "softmax", "moe-routing",
                           "moe-permute", "embedding"}) {
    const OpInfo& op = find_op(name);
    for (auto given : op.check_table) {
      if (device_lacks(name, given)) continue;
      given["device"] = "cuda";
      const OpParams p = resolve_params(op, given);
      const std::unique_ptr<OpCase> c = op.make(p, 0);
      SOL_EXPECT(c->device() == Device::cuda(0), name, " ", c->shape());
      const CheckResult r = c->check();
      SOL_EXPECT(r.pass, name, " ", c->shape(), " ", c->dtype(), ": ", r.detail);
    }
  }
}

SOL_GPU_TEST(bench_cases_on_device) {
  struct Case {
    const char* op;
    std::map<std::string, std::string> given;
  };
  for (const Case& k : {Case{"copy", {{"n", "28M"}, {"dtype", "bf16"}}}, Case{"copy", {{"n", "1M"}}},
                        Case{"cast", {{"n", "28M"}, {"from", "f32"}, {"to", "bf16"}}}, Case{"rmsnorm", {}},
                        Case{"rmsnorm", {{"fuse", "residual"}}}, Case{"rmsnorm", {{"fuse", "quant"}}}}) {
    const OpInfo& op = find_op(k.op);
    auto given = k.given;
    given["device"] = "cuda:0";
    BenchOptions opt;
    opt.run_check = true;
    opt.timing.min_seconds = 0.05;
    const BenchRecord r = bench_case(op, resolve_params(op, given), MachineProfile{}, opt);
    SOL_EXPECT(r.check && r.check->pass, k.op, " ", r.shape);
    SOL_EXPECT(r.isa.rfind("cuda:0 sm_", 0) == 0, r.isa);
    // Every run must read from HBM: a case smaller than four times the device's reported L2
    // rotates sets (cold); one at or above it (rmsnorm + residual moves 235 MB, over an H100's
    // 4 x 50 MiB but under an H200's 4 x 60 MiB) runs its one set.
    const int64_t l2 = cuda_device(0).l2_bytes, hbm_bytes = device_cold_bytes(l2);
    SOL_EXPECT(r.cold == (r.cost.bytes < double(hbm_bytes)), k.op, " ", r.shape, " ", r.dtype, ": ", r.cost.bytes,
               " bytes, L2 ", l2, ": cold ", r.cold, " but a device case rotates sets exactly when it moves fewer than ",
               hbm_bytes, " bytes");
    SOL_EXPECT(r.cold ? r.input_sets >= 2 : r.input_sets == 1, k.op, " ", r.shape, " ", r.dtype, ": ",
               r.input_sets, " input sets, cold ", r.cold);
    SOL_EXPECT(r.timing.runs >= 10 && r.timing.median_s > 0, r.timing.runs);
    SOL_EXPECT(r.ceiling_paired > 0, k.op, " ", r.shape);
    SOL_EXPECT(r.sol_pct > 0 && r.sol_pct <= 105, k.op, " ", r.shape, ": SOL ", r.sol_pct, "%");
    std::printf("%s %s %s: %.1f GB/s, SOL %.1f%%\n", k.op, r.shape.c_str(), r.dtype.c_str(), r.gbps, r.sol_pct);
  }
}

}  // namespace sol
