// Normal-mode dispatch and combine across (emulated) nodes: the results must equal the
// single-path reference (one all_to_all_v transfer per destination rank) exactly, and the
// traffic across nodes must be one record per (token, destination node): the count that
// get_dispatch_layout's num_tokens_per_node gives, and the count this test recomputes from every
// rank's routing. Run under mpirun as one node (no cross traffic), as 2 nodes of 2, 4 nodes of
// 1, and as nodes of unequal size (2 + 1), where the buffer falls back to one transfer per
// destination rank.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_check.h"
#include "sol/comm.h"
#include "sol/ep.h"

using namespace sol;
using sol::comm::Group;
using sol::comm::testing::Checker;

namespace {

enum class Routing { random, node_zero_only, every_rank, empty_rank, all_dropped };
const char* routing_name(Routing r) {
  switch (r) {
    case Routing::random: return "random";
    case Routing::node_zero_only: return "node-zero-only";
    case Routing::every_rank: return "every-rank";
    case Routing::empty_rank: return "empty-rank";
    case Routing::all_dropped: return "all-dropped";
  }
  return "?";
}

uint64_t mix(uint64_t x) {
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
float tag(int rank, int64_t t, int64_t h) {
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

Inputs make_inputs(const Case& c, int rank, int64_t shift) {
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
std::vector<bool> destinations(const Case& c, const Inputs& in, int64_t t) {
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

Expected reference_dispatch(const Group& g, const Case& c, const Inputs& in) {
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

bool same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

struct Topology {
  std::vector<int> node_of, local_of;
  int nodes = 1;
  bool uniform = true;
};

Topology topology(const Group& g) {
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

CrossCount expected_cross(const Group& g, const Topology& topo, const Case& c) {
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

void check_traffic(Checker& chk, const ep::Traffic& got, int64_t sent, int64_t received, int64_t bytes_per_token,
                   const std::string& what) {
  chk.expect(got.cross_node_tokens_sent == sent, what + ": " + std::to_string(got.cross_node_tokens_sent) +
                                                     " tokens sent across nodes, expected " + std::to_string(sent));
  chk.expect(got.cross_node_tokens_received == received,
             what + ": " + std::to_string(got.cross_node_tokens_received) + " tokens received across nodes, expected " +
                 std::to_string(received));
  chk.expect(got.cross_node_bytes_sent == sent * bytes_per_token && got.cross_node_bytes_received == received * bytes_per_token,
             what + ": cross-node bytes " + std::to_string(got.cross_node_bytes_sent) + " / " +
                 std::to_string(got.cross_node_bytes_received) + ", expected " + std::to_string(bytes_per_token) +
                 " per token");
}

void check_case(const Group& g, const Topology& topo, Checker& chk, const Case& c) {
  const int R = g.size(), me = g.rank();
  const std::string what = std::string(c.fp8 ? "fp8 " : "bf16 ") + routing_name(c.routing) + " H=" +
                           std::to_string(c.hidden) + " R=" + std::to_string(R) + " nodes=" + std::to_string(topo.nodes);
  ep::BufferConfig cfg;
  cfg.hidden = c.hidden;
  cfg.num_experts = c.experts;
  cfg.top_k = c.top_k;
  cfg.dtype = c.fp8 ? DType::f8e4m3 : DType::bf16;
  cfg.max_tokens_per_rank = c.max_tokens;
  ep::Buffer buf(g, cfg);
  const int64_t T = c.tokens(me), H = c.hidden, K = c.top_k, S = H / 128;
  const int64_t rb = c.fp8 ? H : 2 * H, sb = c.fp8 ? S * 4 : 0;
  const CrossCount cross = expected_cross(g, topo, c);
  const bool no_cross = topo.nodes == 1;
  ep::DispatchHandle handle;

  // Three rounds on one buffer: regions and flags are reused; a cached dispatch in between.
  for (int round = 0; round < 3; ++round) {
    const std::string label = what + " round " + std::to_string(round);
    Inputs in = make_inputs(c, me, 0);
    Tensor idx(in.idx.data(), DType::i32, {T, K}), w(in.w.data(), DType::f32, {T, K});
    Tensor x = c.fp8 ? Tensor(in.x8.data(), DType::f8e4m3, {T, H}) : Tensor(in.x.data(), DType::bf16, {T, H});
    Tensor xs(in.scales.data(), DType::f32, {T, S});
    const ep::DispatchLayout& layout = buf.get_dispatch_layout(idx);

    // num_tokens_per_node against a direct count; the sent volume against it.
    std::vector<int32_t> per_node(static_cast<size_t>(topo.nodes), 0);
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<bool> to = destinations(c, in, t);
      std::vector<bool> hit(static_cast<size_t>(topo.nodes), false);
      for (int d = 0; d < R; ++d)
        if (to[size_t(d)]) hit[size_t(topo.node_of[size_t(d)])] = true;
      for (int n = 0; n < topo.nodes; ++n) per_node[size_t(n)] += hit[size_t(n)];
    }
    chk.expect(layout.num_tokens_per_node.numel() == topo.nodes &&
                   same(layout.num_tokens_per_node.data(), per_node.data(), per_node.size() * 4),
               label + ": num_tokens_per_node");
    int64_t layout_cross = 0;
    for (int n = 0; n < topo.nodes; ++n)
      if (n != topo.node_of[size_t(me)])
        layout_cross += topo.uniform ? layout.num_tokens_per_node.data_as<int32_t>()[n] : 0;
    if (!topo.uniform)
      for (int d = 0; d < R; ++d)
        if (topo.node_of[size_t(d)] != topo.node_of[size_t(me)]) layout_cross += layout.num_tokens_per_rank.data_as<int32_t>()[d];

    ep::DispatchResult r = buf.dispatch(x, c.fp8 ? &xs : nullptr, idx, w, layout, handle, 1);
    Expected ex = reference_dispatch(g, c, in);
    chk.expect(r.recv_x.shape(0) == ex.rows, label + ": received " + std::to_string(r.recv_x.shape(0)) +
                                                 " rows, expected " + std::to_string(ex.rows));
    if (r.recv_x.shape(0) == ex.rows) {
      chk.expect(same(r.recv_x.data(), ex.x.data(), ex.x.size()), label + ": recv_x");
      if (c.fp8) chk.expect(same(r.recv_x_scales.data(), ex.scales.data(), ex.scales.size()), label + ": recv_x_scales");
      chk.expect(same(r.recv_topk_idx.data(), ex.idx.data(), ex.idx.size() * 4), label + ": recv_topk_idx");
      chk.expect(same(r.recv_topk_weights.data(), ex.w.data(), ex.w.size() * 4), label + ": recv_topk_weights");
    }
    std::vector<int32_t> per_local(static_cast<size_t>(c.local()), 0);
    for (int32_t e : ex.idx)
      if (e >= 0) ++per_local[size_t(e)];
    chk.expect(same(r.num_recv_tokens_per_expert.data(), per_local.data(), per_local.size() * 4),
               label + ": num_recv_tokens_per_expert");
    const ep::Traffic dt = buf.last_dispatch_traffic();
    chk.expect(dt.cross_node_tokens_sent == layout_cross,
               label + ": tokens sent across nodes = " + std::to_string(dt.cross_node_tokens_sent) +
                   " but the layout's per-node counts give " + std::to_string(layout_cross));
    check_traffic(chk, dt, no_cross ? 0 : cross.sent, no_cross ? 0 : cross.received, rb + sb + 8 * K, label + " dispatch");

    if (!c.fp8) {
      // y differs per expert rank (recv_x + rank + 1), so a row combined from the wrong rank shows.
      std::vector<uint16_t> y(size_t(ex.rows * H));
      for (size_t i = 0; i < y.size(); ++i) y[i] = f32_to_bf16(bf16_to_f32(r.recv_x.data_as<uint16_t>()[i]) + float(me + 1));
      std::vector<float> ranks_plus_one(static_cast<size_t>(R));
      for (int d = 0; d < R; ++d) ranks_plus_one[size_t(d)] = float(d + 1);
      std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
      buf.combine(Tensor(y.data(), DType::bf16, {ex.rows, H}), handle, Tensor(out.data(), DType::bf16, {T, H}));
      bool ok = true;
      for (int64_t t = 0; t < T && ok; ++t) {
        const std::vector<bool> to = destinations(c, in, t);
        int dests = 0;
        float offsets = 0;
        for (int d = 0; d < R; ++d)
          if (to[size_t(d)]) ++dests, offsets += ranks_plus_one[size_t(d)];
        for (int64_t h = 0; h < H && ok; ++h) ok = bf16_to_f32(out[size_t(t * H + h)]) == float(dests) * tag(me, t, h) + offsets;
        if (!ok) chk.expect(false, label + ": combine token " + std::to_string(t));
      }
      chk.expect(ok, label + ": combine = sum over destination ranks of their y rows");
      check_traffic(chk, buf.last_combine_traffic(), no_cross ? 0 : cross.received, no_cross ? 0 : cross.sent, 2 * H,
                    label + " combine");
    }

    // Cached dispatch of a new payload: the same rows, records without ids and weights.
    Inputs in2 = make_inputs(c, me, 1000 + round);
    Tensor x2 = c.fp8 ? Tensor(in2.x8.data(), DType::f8e4m3, {T, H}) : Tensor(in2.x.data(), DType::bf16, {T, H});
    Tensor xs2(in2.scales.data(), DType::f32, {T, S});
    ep::DispatchResult r2 = buf.dispatch(x2, c.fp8 ? &xs2 : nullptr, handle);
    Expected ex2 = reference_dispatch(g, c, in2);
    chk.expect(r2.recv_x.shape(0) == ex2.rows && same(r2.recv_x.data(), ex2.x.data(), ex2.x.size()),
               label + ": cached dispatch recv_x");
    if (c.fp8) chk.expect(same(r2.recv_x_scales.data(), ex2.scales.data(), ex2.scales.size()), label + ": cached recv_x_scales");
    check_traffic(chk, buf.last_dispatch_traffic(), no_cross ? 0 : cross.sent, no_cross ? 0 : cross.received, rb + sb,
                  label + " cached dispatch");
    if (!c.fp8) {
      std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
      buf.combine(r2.recv_x, handle, Tensor(out.data(), DType::bf16, {T, H}));
      bool ok = true;
      for (int64_t t = 0; t < T && ok; ++t) {
        const std::vector<bool> to = destinations(c, in, t);
        const float dests = float(std::count(to.begin(), to.end(), true));
        for (int64_t h = 0; h < H && ok; ++h) ok = bf16_to_f32(out[size_t(t * H + h)]) == dests * tag(me, t + 1000 + round, h);
      }
      chk.expect(ok, label + ": combine after the cached dispatch");
    }
  }
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker chk;
  chk.rank = world.rank();
  const int R = world.size();
  const Topology topo = topology(world);
  int node1 = R;
  for (int p = 0; p < R; ++p)
    if (topo.node_of[size_t(p)] != topo.node_of[0]) node1 = std::min(node1, p);
  const Routing routings[] = {Routing::random, Routing::node_zero_only, Routing::every_rank, Routing::empty_rank,
                              Routing::all_dropped};
  for (Routing routing : routings)
    for (bool fp8 : {false, true}) {
      const int64_t K = routing == Routing::every_rank ? R : 4;
      check_case(world, topo, chk, Case{R, 256, int64_t(8) * R, K, 29, routing, fp8, node1});
    }
  // DeepSeek-V3's width and top-8, with more tokens than one pass of anything.
  check_case(world, topo, chk, Case{R, 7168, int64_t(16) * R, 8, 70, Routing::random, false, node1});
  check_case(world, topo, chk, Case{R, 7168, int64_t(16) * R, 8, 70, Routing::random, true, node1});
  return chk.finish(topo.nodes > 1 ? (topo.uniform ? "mpi_ep_hierarchical (hierarchical)" : "mpi_ep_hierarchical (uneven nodes)")
                                   : "mpi_ep_hierarchical (one node)");
}
