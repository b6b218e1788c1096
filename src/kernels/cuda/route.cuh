#pragma once
// sol::moe_routing (sigmoid scoring, group-limited: DeepSeek-V3) on the device: one warp per
// token. Lane l holds experts [l * kPerLane, (l + 1) * kPerLane) (kPerLane = 8 for 256
// experts: one 16-byte load per lane for bf16 logits, two for f32, when the host found the rows
// whole and aligned), their scores and order keys in registers. The groups' top two are
// per-lane top twos merged over the warp (one xor butterfly per group), a group's rank counts
// the groups before it, and the top k takes k rounds of a warp argmax over (key, lower index).
// All of it is route_math.cuh's exact, order-free arithmetic and device_exp_math.cuh's sigmoid,
// which tests/device/test_cuda_route_math.cc runs against the CPU path: the experts and the
// weights are the CPU's bits (NaN weights are NaN).
#include "kernels/cuda/route_math.cuh"
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

__device__ __forceinline__ RouteTop2 shfl_xor_top2(RouteTop2 t, int o) {
  return {__shfl_xor_sync(0xFFFFFFFFu, t.h, o), __shfl_xor_sync(0xFFFFFFFFu, t.l, o)};
}
__device__ __forceinline__ RouteTop2 shfl_top2(RouteTop2 t, int src) {
  return {__shfl_sync(0xFFFFFFFFu, t.h, src), __shfl_sync(0xFFFFFFFFu, t.l, src)};
}

template <int kPerLane, bool kBf16>
__device__ __forceinline__ void route_token(const RouteArgs& a, long long t, int lane) {
  const unsigned all = 0xFFFFFFFFu;
  const int es = kBf16 ? 2 : 4;
  const char* row = static_cast<const char*>(a.logits) + t * a.e * es;
  const int first = lane * kPerLane;
  float score[kPerLane];
  int key[kPerLane];
  bool loaded = false;
  if constexpr (kPerLane * (kBf16 ? 2 : 4) % 16 == 0) {  // a lane's experts are whole vectors
    if (a.vectors) {
      const uint4* q = reinterpret_cast<const uint4*>(row + first * es);
      u32 w[kPerLane * (kBf16 ? 2 : 4) / 4];
#pragma unroll
      for (int v = 0; v < kPerLane * es / 16; ++v) {
        const uint4 b = q[v];
        w[4 * v] = b.x, w[4 * v + 1] = b.y, w[4 * v + 2] = b.z, w[4 * v + 3] = b.w;
      }
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        if constexpr (kBf16) score[j] = __uint_as_float((j & 1) ? (w[j / 2] & 0xFFFF0000u) : (w[j / 2] << 16));
        else score[j] = __uint_as_float(w[j]);
      }
      loaded = true;
    }
  }
  if (!loaded) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = first + j < a.e ? Elem<kCodeOf<kBf16>>::get(row, first + j) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    score[j] = sigmoid_f32(score[j]);
    const float sel = a.bias && first + j < a.e ? score[j] + a.bias[first + j] : score[j];
    key[j] = first + j < a.e ? route_key(sel) : kRouteNotEligible;
  }
  if (a.n_group > 1) {
    const int per_group = a.e / a.n_group, lanes_per_group = per_group / kPerLane;
    int group_key = kRouteNotEligible;
    if (lanes_per_group > 0 && per_group % kPerLane == 0 && (lanes_per_group & (lanes_per_group - 1)) == 0) {
      // Each lane's experts lie in one group, a group's lanes an aligned power-of-two run
      // (DeepSeek-V3: 4 lanes per group): every group's top two at once, log2(lanes) merges.
      // The merges are exact and order-free, so the keys are the per-group loop's below.
      RouteTop2 top = route_top2_empty();
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) top = route_top2_add(top, key[j]);
      for (int o = 1; o < lanes_per_group; o <<= 1) top = route_top2_merge(top, shfl_xor_top2(top, o));
      const RouteTop2 mine = shfl_top2(top, (lane * lanes_per_group) & 31);  // group `lane`'s
      if (lane < a.n_group) group_key = route_group_key(mine, true);
    } else {
      for (int g = 0; g < a.n_group; ++g) {
        RouteTop2 top = route_top2_empty();
#pragma unroll
        for (int j = 0; j < kPerLane; ++j)
          if ((first + j) / per_group == g) top = route_top2_add(top, key[j]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) top = route_top2_merge(top, shfl_xor_top2(top, o));
        if (lane == g) group_key = route_group_key(top, true);
      }
    }
    int rank = 0;
    for (int g = 0; g < a.n_group; ++g) {
      const int other = __shfl_sync(all, group_key, g);
      rank += g != lane && route_before(other, g, group_key, lane) ? 1 : 0;
    }
    const unsigned chosen = __ballot_sync(all, lane < a.n_group && rank < a.topk_group);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (first + j < a.e && !((chosen >> ((first + j) / per_group)) & 1u)) key[j] = kRouteNotEligible;
  }
  int my_idx = 0;
  float my_weight = 0, sum = 0;
  for (int r = 0; r < a.k; ++r) {
    int best_key = kRouteNotEligible, best_idx = 0x7FFFFFFF;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (key[j] != kRouteNotEligible && route_before(key[j], first + j, best_key, best_idx))
        best_key = key[j], best_idx = first + j;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const int ok = __shfl_xor_sync(all, best_key, o), oi = __shfl_xor_sync(all, best_idx, o);
      if (route_before(ok, oi, best_key, best_idx)) best_key = ok, best_idx = oi;
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (first + j == best_idx) s = score[j], key[j] = kRouteNotEligible;
    s = __shfl_sync(all, s, best_idx / kPerLane);
    sum += s;
    if (lane == r) my_idx = best_idx, my_weight = s;
  }
  if (lane < a.k) {
    const long long o = t * a.k + lane;
    a.weights[o] = my_weight * route_factor(sum, a.renormalize != 0, a.scaling);
    if (a.idx64) static_cast<long long*>(a.idx)[o] = my_idx;
    else static_cast<int*>(a.idx)[o] = my_idx;
  }
}

}  // namespace sol_cuda

// sol_route_sigmoid_<per lane>_<bf16>: 4 warps per block, one token per warp (grid-stride).
#define SOL_CUDA_ROUTE_KERNEL(per_lane, bf16)                                                              \
  extern "C" __global__ void __launch_bounds__(128) sol_route_sigmoid_##per_lane##_##bf16(                 \
      const sol_cuda::RouteArgs args) {                                                                    \
    const int lane = threadIdx.x & 31;                                                                     \
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);                                      \
    for (long long t = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; t < args.tokens; t += warps) \
      sol_cuda::route_token<per_lane, bf16>(args, t, lane);                                                \
  }
