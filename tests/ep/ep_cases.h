#pragma once
// Routing cases, tagged inputs and the single-path reference (each token's record sent once to
// each destination rank through all_to_all_v) shared by the sol::ep MPI tests in this folder.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

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

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
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

struct Inputs {
  std::vector<uint16_t> x;
  std::vector<uint8_t> x8;
  std::vector<float> scales, w;
  std::vector<int32_t> idx;
};

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

// The single-path reference: each token's record sent once to each destination rank through
// all_to_all_v, received in source-rank order.
struct Expected {
  std::vector<std::byte> x, scales;
  std::vector<int32_t> idx;
  std::vector<float> w;
  int64_t rows = 0;
};

inline Expected reference_dispatch(const Group& g, const Case& c, const Inputs& in) {
  const int R = g.size(), me = g.rank();
  const int64_t T = c.tokens(me), H = c.hidden, K = c.top_k, L = c.local(), S = H / 128;
  const int64_t rb = c.fp8 ? H : 2 * H, sb = c.fp8 ? S * 4 : 0, rec = rb + sb + 8 * K;
  std::vector<std::vector<std::byte>> per_dst(static_cast<size_t>(R));
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<bool> to = destinations(c, in, t);
    for (int d = 0; d < R; ++d) {
      if (!to[size_t(d)]) continue;
      std::vector<std::byte> r(static_cast<size_t>(rec));
      std::memcpy(r.data(), c.fp8 ? static_cast<const void*>(in.x8.data() + t * H) : in.x.data() + t * H, size_t(rb));
      if (sb) std::memcpy(r.data() + rb, in.scales.data() + t * S, size_t(sb));
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = in.idx[size_t(t * K + j)];
        const int32_t le = e >= 0 && e / L == d ? int32_t(e - d * L) : -1;
        const float w = le >= 0 ? in.w[size_t(t * K + j)] : 0.0f;
        std::memcpy(r.data() + rb + sb + j * 4, &le, 4);
        std::memcpy(r.data() + rb + sb + K * 4 + j * 4, &w, 4);
      }
      per_dst[size_t(d)].insert(per_dst[size_t(d)].end(), r.begin(), r.end());
    }
  }
  std::vector<std::byte> send;
  std::vector<int64_t> send_counts(static_cast<size_t>(R)), recv_counts(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) {
    send_counts[size_t(d)] = int64_t(per_dst[size_t(d)].size());
    send.insert(send.end(), per_dst[size_t(d)].begin(), per_dst[size_t(d)].end());
  }
  g.all_to_all(Tensor(send_counts.data(), DType::i8, {int64_t(8 * R)}),
               Tensor(recv_counts.data(), DType::i8, {int64_t(8 * R)}));
  int64_t total = 0;
  for (int64_t n : recv_counts) total += n;
  std::vector<std::byte> recv(static_cast<size_t>(std::max<int64_t>(total, 1)));
  send.resize(std::max<size_t>(send.size(), 1));
  g.all_to_all_v(Tensor(send.data(), DType::i8, {int64_t(send.size())}), send_counts,
                 Tensor(recv.data(), DType::i8, {int64_t(recv.size())}), recv_counts);
  Expected ex;
  ex.rows = total / rec;
  ex.x.resize(size_t(ex.rows * rb));
  ex.scales.resize(size_t(ex.rows * sb));
  ex.idx.resize(size_t(ex.rows * K));
  ex.w.resize(size_t(ex.rows * K));
  for (int64_t i = 0; i < ex.rows; ++i) {
    const std::byte* p = recv.data() + i * rec;
    std::memcpy(ex.x.data() + i * rb, p, size_t(rb));
    std::memcpy(ex.scales.data() + i * sb, p + rb, size_t(sb));
    std::memcpy(ex.idx.data() + i * K, p + rb + sb, size_t(K * 4));
    std::memcpy(ex.w.data() + i * K, p + rb + sb + K * 4, size_t(K * 4));
  }
  return ex;
}

inline bool same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

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
