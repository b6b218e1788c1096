// sol::moe_routing's CUDA entry: src/kernels/cuda/route.cuh, one warp per token, the same
// experts and weights as the CPU path (its AVX-512 scores; NaN weights compare as NaN).
// Sigmoid scoring only (DeepSeek-V3), up to 256 experts, 32 groups and top_k 32: a lane holds
// at most 8 experts, a group or a choice per lane.
#include <algorithm>
#include <cstdint>
#include <string>

#include "device/cuda/launch.h"
#include "kernels/cuda/route_math.cuh"
#include "ops/routing/routing_backends.h"
#include "sol/device.h"

namespace sol {

namespace {

const cuda::CudaProgram& route_program() {
  static const cuda::CudaProgram p = [] {
    cuda::CudaProgram program;
    program.name = "sol_route";
    program.source = "#include \"kernels/cuda/route.cuh\"\n";
    for (const char* per_lane : {"1", "2", "4", "8"})
      for (const char* bf16 : {"false", "true"})
        program.source += std::string("SOL_CUDA_ROUTE_KERNEL(") + per_lane + ", " + bf16 + ")\n";
    return program;
  }();
  return p;
}

}  // namespace

void moe_routing_cuda(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights,
                      const RoutingOptions& o) {
  const char* op = "moe_routing";
  const int64_t tokens = logits.shape(0), e = logits.shape(1);
  check(o.scoring == Scoring::sigmoid, op, "scoring = softmax is not supported on ", logits.device(),
        " (sigmoid only, DeepSeek-V3)");
  check(e <= 256, op, "logits.shape[1] = ", e, " experts but ", logits.device(), " supports at most 256");
  check(o.n_group <= 32, op, "n_group = ", o.n_group, " but ", logits.device(), " supports at most 32");
  check(o.top_k <= 32, op, "top_k = ", o.top_k, " but ", logits.device(), " supports at most 32");
  if (tokens == 0) return;
  check(logits.device_data() && topk_idx.device_data() && topk_weights.device_data(), op,
        "an operand has elements but no data");
  const int per_lane = e <= 32 ? 1 : e <= 64 ? 2 : e <= 128 ? 4 : 8;
  const int64_t es = int64_t(dtype_size(logits.dtype()));
  // Whole 16-byte vectors per lane: every expert slot real, rows and the base aligned.
  const bool vectors = e == 32 * per_lane && (per_lane * es) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(logits.device_data()) % 16 == 0;
  sol_cuda::RouteArgs a{};
  a.logits = logits.device_data();
  a.bias = o.correction_bias ? static_cast<const float*>(o.correction_bias->device_data()) : nullptr;
  a.idx = topk_idx.device_data();
  a.weights = static_cast<float*>(topk_weights.device_data());
  a.tokens = tokens;
  a.e = int(e), a.n_group = int(o.n_group), a.topk_group = int(o.topk_group), a.k = int(o.top_k);
  a.idx64 = topk_idx.dtype() == DType::i64, a.renormalize = o.renormalize, a.vectors = vectors;
  a.scaling = o.scaling;
  const std::string name = "sol_route_sigmoid_" + std::to_string(per_lane) +
                           (logits.dtype() == DType::bf16 ? "_true" : "_false");
  const cuda::Kernel kernel = cuda::get_kernel(route_program(), name.c_str(), logits.device());
  void* args[] = {&a};
  cuda::LaunchShape shape;
  shape.block[0] = 128;  // 4 tokens per block
  shape.grid[0] = unsigned(std::min<int64_t>((tokens + 3) / 4, 16LL * cuda_device(logits.device().index).sm_count));
  cuda::launch(kernel, shape, current_stream(logits.device()), args);
}

}  // namespace sol
