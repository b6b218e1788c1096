#pragma once
// Routing cases, tagged inputs and the single-path reference (each token's record sent once to
// each destination rank through all_to_all_v) shared by the sol::ep MPI tests in this folder.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ep_mix.h"
#include "ep_reference.h"
#include "mpi_check.h"
#include "sol/comm.h"
#include "sol/ep.h"

namespace sol::ep::testing {

using sol::comm::Group;


enum class Routing { random, node_zero_only, every_rank, empty_rank, all_dropped };
inline const char* routing_name(Routing r) {
  switch (r) {
    case Routing::random: return "random";
    case Routing::node_zero_only: return "node-zero-only";
    case Routing::every_rank: return "every-rank";
    case Routing::empty_rank: return "empty-rank";
    case Routing::all_dropped: return "all-dropped";
  }
  return "?";
}

struct Case {
  int ranks;
  int64_t hidden, experts, top_k, max_tokens;
  Routing routing;
  bool fp8;
  int first_rank_of_node1;  // experts of ranks below it are "node zero" for node_zero_only

  int64_t local() const { return experts / ranks; }
  int64_t tokens(int rank) const {
    if (routing == Routing::empty_rank && rank == ranks - 1) return 0;
    return max_tokens - (rank * 5) % std::max<int64_t>(1, max_tokens / 3);
  }
  // Distinct experts per token, some choices dropped (-1).
  void route(int rank, int64_t t, int32_t* out) const {
    for (int64_t j = 0; j < top_k; ++j) out[j] = -1;
    if (routing == Routing::all_dropped) return;
    if (routing == Routing::every_rank) {  // one expert on every rank (top_k == ranks)
      for (int64_t j = 0; j < top_k; ++j) out[j] = int32_t(j * local() + int64_t(mix(uint64_t(rank * 131 + t)) % uint64_t(local())));
      return;
    }
    const int64_t pool = routing == Routing::node_zero_only ? first_rank_of_node1 * local() : experts;
    for (int64_t j = 0; j < top_k; ++j) {
      const uint64_t h = mix(uint64_t(rank) << 40 ^ uint64_t(t) << 8 ^ uint64_t(j) ^ uint64_t(routing) << 50);
      if (h % 6 == 0) continue;
      const int64_t e = int64_t(h >> 8) % pool;
      bool seen = false;
      for (int64_t i = 0; i < j; ++i) seen |= out[i] == e;
      if (!seen) out[j] = int32_t(e);
    }
  }
};

// Small integers: sums of a few stay exact in bf16.
inline float tag(int rank, int64_t t, int64_t h) {
  if (h == 0) return float(rank);
  if (h == 1) return float(t % 64);
  return float(int64_t((t * 5 + h * 3 + rank * 7) % 48) - 24);
}


inline Inputs make_inputs(const Case& c, int rank, int64_t shift) {
  Inputs in;
  const int64_t T = c.tokens(rank), H = c.hidden, S = H / 128, K = c.top_k;
  in.x.resize(size_t(T * H));
  in.x8.resize(size_t(T * H));
  in.scales.resize(size_t(T * S));
  in.idx.resize(size_t(T * K));
  in.w.resize(size_t(T * K));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      in.x[size_t(t * H + h)] = f32_to_bf16(tag(rank, t + shift, h));
      in.x8[size_t(t * H + h)] = uint8_t((rank * 29 + (t + shift) * 13 + h * 7) % 0x7E);
    }
    for (int64_t b = 0; b < S; ++b) in.scales[size_t(t * S + b)] = float(rank * 100000 + (t + shift) * 10 + b);
    c.route(rank, t, in.idx.data() + t * K);
    for (int64_t j = 0; j < K; ++j) in.w[size_t(t * K + j)] = 0.5f + 0.125f * float((rank + t + j) % 8);
  }
  return in;
}

// The destination ranks of (rank, token), as a bitmask over ranks.
inline std::vector<bool> destinations(const Case& c, const Inputs& in, int64_t t) {
  std::vector<bool> to(static_cast<size_t>(c.ranks), false);
  for (int64_t j = 0; j < c.top_k; ++j)
    if (int32_t e = in.idx[size_t(t * c.top_k + j)]; e >= 0) to[size_t(e / c.local())] = true;
  return to;
}

// The y an expert rank hands to combine in these tests: its received rows plus (rank + 1), so a
// row combined from the wrong rank shows in the sum.
inline std::vector<uint16_t> rank_tagged_y(const Tensor& recv_x, int rank) {
  const int64_t n = recv_x.numel();
  std::vector<uint16_t> y(size_t(std::max<int64_t>(n, 1)));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = f32_to_bf16(bf16_to_f32(recv_x.data_as<uint16_t>()[i]) + float(rank + 1));
  return y;
}

// Checks combine's output (T x H bf16) on rank `me`, whose tokens were made with
// make_inputs(c, me, shift): row t must be the sum over t's destination ranks d of x's row t,
// plus d + 1 when each d combined its rank_tagged_y. All values are small integers, so exact.
inline void expect_combined(comm::testing::Checker& chk, const Case& c, const Inputs& in, int me, int64_t shift,
                            bool rank_tagged, const std::vector<uint16_t>& out, const std::string& label) {
  const int64_t T = c.tokens(me), H = c.hidden;
  bool ok = true;
  for (int64_t t = 0; t < T && ok; ++t) {
    const std::vector<bool> to = destinations(c, in, t);
    float dests = 0, offsets = 0;
    for (int d = 0; d < c.ranks; ++d)
      if (to[size_t(d)]) dests += 1, offsets += rank_tagged ? float(d + 1) : 0.0f;
    for (int64_t h = 0; h < H && ok; ++h) ok = bf16_to_f32(out[size_t(t * H + h)]) == dests * tag(me, t + shift, h) + offsets;
    if (!ok) chk.expect(false, label + ": token " + std::to_string(t));
  }
  chk.expect(ok, label + ": out = sum over destination ranks of their y rows");
}


inline Expected reference_dispatch(const Group& g, const Case& c, const Inputs& in) {
  return reference_dispatch(g, in, c.tokens(g.rank()), c.hidden, c.top_k, c.local(), c.fp8);
}

struct Topology {
  std::vector<int> node_of, local_of;
  int nodes = 1;
  bool uniform = true;
};

inline Topology topology(const Group& g) {
  int32_t mine[2] = {g.node(), g.local().rank()};
  std::vector<int32_t> all(size_t(2 * g.size()));
  g.all_gather(Tensor(mine, DType::i32, {2}), Tensor(all.data(), DType::i32, {int64_t(2 * g.size())}));
  Topology t;
  t.nodes = g.num_nodes();
  std::vector<int> size(static_cast<size_t>(t.nodes), 0);
  for (int p = 0; p < g.size(); ++p) {
    t.node_of.push_back(all[size_t(2 * p)]);
    t.local_of.push_back(all[size_t(2 * p + 1)]);
    ++size[size_t(all[size_t(2 * p)])];
  }
  for (int n : size) t.uniform &= n == size[0];
  return t;
}

// Tokens `rank` sends across nodes, and this rank receives across nodes, recomputed from every
// rank's routing: once per (token, destination node) on the hierarchical path (to and from the
// ranks with the same local index), once per (token, destination rank) on the fall-back.
struct CrossCount {
  int64_t sent = 0, received = 0;
};

inline CrossCount expected_cross(const Group& g, const Topology& topo, const Case& c) {
  const int R = g.size(), me = g.rank();
  CrossCount cc;
  for (int p = 0; p < R; ++p) {
    const bool related = p == me || (topo.uniform ? topo.local_of[size_t(p)] == topo.local_of[size_t(me)] : true);
    if (!related) continue;
    Inputs in = make_inputs(c, p, 0);
    for (int64_t t = 0; t < c.tokens(p); ++t) {
      const std::vector<bool> to = destinations(c, in, t);
      std::vector<bool> node_hit(static_cast<size_t>(topo.nodes), false);
      for (int d = 0; d < R; ++d) {
        if (!to[size_t(d)] || topo.node_of[size_t(d)] == topo.node_of[size_t(p)]) continue;
        if (topo.uniform) {
          node_hit[size_t(topo.node_of[size_t(d)])] = true;
        } else {
          if (p == me) ++cc.sent;
          if (d == me) ++cc.received;
        }
      }
      if (!topo.uniform) continue;
      for (int n = 0; n < topo.nodes; ++n) {
        if (!node_hit[size_t(n)]) continue;
        if (p == me) ++cc.sent;
        if (n == topo.node_of[size_t(me)] && p != me) ++cc.received;
      }
    }
  }
  return cc;
}

}  // namespace sol::ep::testing
