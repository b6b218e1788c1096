#pragma once
// The ranking arithmetic of MoE routing (sol/routing.h), written once for the device kernel
// (route.cuh) and the host test that runs it against the CPU path. Every reduction here is
// exact and order-free (maxima and minima of integer keys, an argmax over distinct indices), so
// the warp's shuffle order cannot change a result; the weights are summed in output order, one
// rounding per step, as the CPU does.
#include "kernels/cuda/device_exp_math.cuh"

namespace sol_cuda {

typedef unsigned int route_u32;

// Order keys, as kernels/route.h: a float's bits as a signed int whose order is the float's
// (selection scores are never -0), NaN just above "not eligible".
const int kRouteNotEligible = -2147483647 - 1;
const int kRouteNanKey = -2147483647;

SOL_EXP_HD int route_key(float x) {
  if (x != x) return kRouteNanKey;
  union {
    float f;
    int i;
  } u;
  u.f = x;
  return u.i ^ ((u.i >> 31) & 0x7FFFFFFF);
}

// The float a key stands for (the NaN key reads back as a NaN).
SOL_EXP_HD float route_key_score(int k) {
  union {
    float f;
    int i;
  } u;
  u.i = k ^ ((k >> 31) & 0x7FFFFFFF);
  return u.f;
}

// The two largest keys of a set (h >= l); kRouteNotEligible where the set has fewer.
struct RouteTop2 {
  int h, l;
};
SOL_EXP_HD RouteTop2 route_top2_empty() { return {kRouteNotEligible, kRouteNotEligible}; }
SOL_EXP_HD RouteTop2 route_top2_add(RouteTop2 t, int k) {
  return k > t.h ? RouteTop2{k, t.h} : RouteTop2{t.h, k > t.l ? k : t.l};
}
SOL_EXP_HD RouteTop2 route_top2_merge(RouteTop2 a, RouteTop2 b) {
  const int h = a.h > b.h ? a.h : b.h, lo = a.h > b.h ? b.h : a.h, l = a.l > b.l ? a.l : b.l;
  return {h, lo > l ? lo : l};
}
// A group's score: the sum of its best two selection scores (top2) or its best one, as a key.
SOL_EXP_HD int route_group_key(RouteTop2 t, bool top2) {
  return top2 ? route_key(route_key_score(t.h) + route_key_score(t.l)) : t.h;
}

// True when (ka, ia) ranks before (kb, ib): the larger key, then the lower index.
SOL_EXP_HD bool route_before(int ka, int ia, int kb, int ib) { return ka != kb ? ka > kb : ia < ib; }

// The routing kernel's arguments (route.cuh), laid out once for the host that fills them.
struct RouteArgs {
  const void* logits;  // [tokens, e]
  const float* bias;   // [e] or null
  void* idx;           // [tokens, k] i32 or i64
  float* weights;      // [tokens, k]
  long long tokens;
  int e, n_group, topk_group, k;  // e <= 32 kPerLane, n_group <= 32, k <= 32
  int idx64, renormalize, vectors;
  float scaling;
};

// What each chosen score is multiplied by, from their sum taken in output order from +0 (the
// device kernel adds the scores one round at a time, as they are chosen).
SOL_EXP_HD float route_factor(float sum, bool renormalize, float scaling) {
  return renormalize ? scaling / sum : scaling;
}

}  // namespace sol_cuda
