// Normal-mode combine in both of its one-node modes: y in any memory (rows copied back; a
// source reads its own rows from y) and y in combine_buffer() (nothing copied; sources read
// the peers' rows in place). Every expert rank's y differs (recv_x + its rank + 1), so a row
// taken from the wrong rank, the wrong token or a stale call shows; the modes alternate on one
// buffer so the region handshakes between them are exercised. Across nodes combine_buffer() is
// refused with a clear error.
#include "ep_cases.h"

using namespace sol;
using namespace sol::ep::testing;
using sol::comm::testing::Checker;

namespace {

void check_combine(const Group& g, Checker& chk, const Case& c) {
  const int R = g.size(), me = g.rank();
  const std::string what = std::string(routing_name(c.routing)) + " H=" + std::to_string(c.hidden) +
                           " R=" + std::to_string(R);
  ep::BufferConfig cfg;
  cfg.hidden = c.hidden;
  cfg.num_experts = c.experts;
  cfg.top_k = c.top_k;
  cfg.max_tokens_per_rank = c.max_tokens;
  ep::Buffer buf(g, cfg);
  const int64_t T = c.tokens(me), H = c.hidden, K = c.top_k;
  // in place, copy, in place, in place, copy: every transition between the modes.
  const bool modes[] = {true, false, true, true, false};
  for (int round = 0; round < 5; ++round) {
    const bool in_place = modes[round];
    const std::string label = what + (in_place ? " in place" : " copy") + " round " + std::to_string(round);
    Inputs in = make_inputs(c, me, round * 100);
    Tensor idx(in.idx.data(), DType::i32, {T, K}), w(in.w.data(), DType::f32, {T, K});
    const ep::DispatchLayout& layout = buf.get_dispatch_layout(idx);
    ep::DispatchHandle handle;
    ep::DispatchResult r = buf.dispatch(Tensor(in.x.data(), DType::bf16, {T, H}), nullptr, idx, w, layout, handle);
    const int64_t N = handle.num_recv_tokens();
    std::vector<uint16_t> own_y;
    Tensor y;
    if (in_place) {
      y = buf.combine_buffer(handle);
      chk.expect(y.shape(0) == N && y.shape(1) == H && y.dtype() == DType::bf16, label + ": combine_buffer shape");
    } else {
      own_y.resize(size_t(std::max<int64_t>(N * H, 1)));
      y = Tensor(own_y.data(), DType::bf16, {N, H});
    }
    const std::vector<uint16_t> tagged = rank_tagged_y(r.recv_x, me);
    std::copy_n(tagged.data(), N * H, y.data_as<uint16_t>());
    std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
    buf.combine(y, handle, Tensor(out.data(), DType::bf16, {T, H}));
    expect_combined(chk, c, in, me, round * 100, true, out, label);
  }

  // A y that overlaps the combine region without being its view is refused.
  if (g.num_nodes() == 1 && c.routing == Routing::random) {
    Inputs in = make_inputs(c, me, 0);
    Tensor ti(in.idx.data(), DType::i32, {T, K}), tw(in.w.data(), DType::f32, {T, K});
    ep::DispatchHandle handle;
    const ep::DispatchLayout& layout = buf.get_dispatch_layout(ti);
    ep::DispatchResult r = buf.dispatch(Tensor(in.x.data(), DType::bf16, {T, H}), nullptr, ti, tw, layout, handle);
    Tensor view = buf.combine_buffer(handle);
    bool threw = false;
    std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)));
    if (handle.num_recv_tokens() > 1) {
      try {
        buf.combine(Tensor(view.data_as<uint16_t>() + H, DType::bf16, {handle.num_recv_tokens(), H}), handle,
                    Tensor(out.data(), DType::bf16, {T, H}));
      } catch (const Error& e) {
        threw = std::string(e.what()).find("combine_buffer") != std::string::npos;
      }
      chk.expect(threw, what + ": a y overlapping the combine region is refused");
    }
    // The buffer still works after the refused call (it threw before any flag moved).
    buf.combine(r.recv_x, handle, Tensor(out.data(), DType::bf16, {T, H}));
    expect_combined(chk, c, in, me, 0, false, out, what + ": combine after a refused call");
  }
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker chk(world.rank());
  const int R = world.size();
  if (world.num_nodes() == 1) {
    for (Routing routing : {Routing::random, Routing::every_rank, Routing::empty_rank, Routing::all_dropped}) {
      const int64_t K = routing == Routing::every_rank ? R : 4;
      check_combine(world, chk, Case{R, 256, int64_t(8) * R, K, 33, routing, false, R});
    }
    check_combine(world, chk, Case{R, 7168, int64_t(16) * R, 8, 90, Routing::random, false, R});
  } else {
    ep::BufferConfig cfg;
    cfg.hidden = 128;
    cfg.num_experts = 2 * R;
    cfg.top_k = 1;
    cfg.max_tokens_per_rank = 4;
    ep::Buffer buf(world, cfg);
    std::vector<int32_t> idx = {0, 1};
    std::vector<float> w = {1, 1};
    std::vector<uint16_t> x(256);
    Tensor ti(idx.data(), DType::i32, {2, 1});
    ep::DispatchHandle handle;
    buf.dispatch(Tensor(x.data(), DType::bf16, {2, 128}), nullptr, ti, Tensor(w.data(), DType::f32, {2, 1}),
                 buf.get_dispatch_layout(ti), handle);
    bool threw = false;
    try {
      buf.combine_buffer(handle);
    } catch (const Error& e) {
      threw = std::string(e.what()).find("one node") != std::string::npos;
    }
    chk.expect(threw, "combine_buffer across nodes is refused, naming why");
  }
  return chk.finish("mpi_ep_combine");
}
