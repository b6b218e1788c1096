// Normal-mode dispatch and combine across (emulated) nodes: the results must equal the
// single-path reference (one all_to_all_v transfer per destination rank) exactly, and the
// traffic across nodes must be one record per (token, destination node): the count that
// get_dispatch_layout's num_tokens_per_node gives, and the count this test recomputes from every
// rank's routing. Run under mpirun as one node (no cross traffic), as 2 nodes of 2, 4 nodes of
// 1, and as nodes of unequal size (2 + 1), where the buffer falls back to one transfer per
// destination rank.
#include "ep_cases.h"

using namespace sol;
using namespace sol::ep::testing;
using sol::comm::Group;
using sol::comm::testing::Checker;

namespace {

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
      std::vector<uint16_t> y = rank_tagged_y(r.recv_x, me);
      std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
      buf.combine(Tensor(y.data(), DType::bf16, {r.recv_x.shape(0), H}), handle, Tensor(out.data(), DType::bf16, {T, H}));
      expect_combined(chk, c, in, me, 0, true, out, label + " combine");
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
      expect_combined(chk, c, in2, me, 1000 + round, false, out, label + " combine after the cached dispatch");
    }
  }
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker chk(world.rank());
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
