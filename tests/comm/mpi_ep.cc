// Expert-parallel dispatch and combine (sol::ep) against references built on all_to_all_v and
// on routing every rank can recompute for every other rank. Inputs encode (source rank,
// token, column) in their values, so every received row is checked exactly. Routing cases:
// random and uneven (with -1 entries), a rank that receives nothing, every token to one
// expert, a rank with no tokens, every entry -1. Run by ctest under mpirun with 2, 3 and 4
// ranks (4 also as two emulated nodes, where normal mode runs through all_to_all_v).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ep_mix.h"
#include "ep_reference.h"
#include "mpi_check.h"
#include "sol/comm.h"
#include "sol/ep.h"
#include "sol/quant.h"

using namespace sol;
using sol::comm::Group;
using sol::comm::testing::Checker;
using sol::ep::testing::Expected;
using sol::ep::testing::Inputs;
using sol::ep::testing::mix;
using sol::ep::testing::same;

namespace {

enum class Routing { random, skip_last_rank, one_expert, empty_rank, all_dropped };
const Routing kRoutings[] = {Routing::random, Routing::skip_last_rank, Routing::one_expert, Routing::empty_rank,
                             Routing::all_dropped};
const char* routing_name(Routing r) {
  switch (r) {
    case Routing::random: return "random";
    case Routing::skip_last_rank: return "skip-last-rank";
    case Routing::one_expert: return "one-expert";
    case Routing::empty_rank: return "empty-rank";
    case Routing::all_dropped: return "all-dropped";
  }
  return "?";
}

struct Problem {
  int ranks;
  int64_t hidden, experts, top_k, max_tokens;
  Routing routing;
  int64_t tokens(int rank) const {
    if (routing == Routing::empty_rank && rank == 1) return 0;
    return max_tokens - (rank * 3) % std::max<int64_t>(1, max_tokens / 2);  // uneven
  }
  // topk_idx of (rank, token): distinct experts, -1 entries, skewed toward low experts.
  void route(int rank, int64_t t, int32_t* out) const {
    const int64_t local = experts / ranks;
    for (int64_t j = 0; j < top_k; ++j) out[j] = -1;
    if (routing == Routing::all_dropped) return;
    if (routing == Routing::one_expert) {
      out[mix(uint64_t(rank * 7 + t)) % uint64_t(top_k)] = int32_t(std::min<int64_t>(3, experts - 1));
      return;
    }
    const int64_t pool = routing == Routing::skip_last_rank ? experts - local : experts;
    for (int64_t j = 0; j < top_k; ++j) {
      uint64_t h = mix(uint64_t(rank) << 40 ^ uint64_t(t) << 8 ^ uint64_t(j) ^ uint64_t(routing) << 50);
      if (h % 7 == 0) continue;  // dropped choice
      int64_t e = int64_t(h >> 8) % pool;
      if ((h >> 3) % 3 == 0) e /= 3;  // skew: low experts (rank 0) get more
      bool seen = false;
      for (int64_t i = 0; i < j; ++i) seen |= out[i] == e;
      if (!seen) out[j] = int32_t(e);
    }
  }
  float weight(int rank, int64_t t, int64_t j) const { return 0.25f * float((rank + t + j) % 8) + 0.5f; }
};

// bf16 tags: small integers, so sums of up to 4 copies stay exact.
float tag(int rank, int64_t t, int64_t h) {
  if (h == 0) return float(rank);
  if (h == 1) return float(t % 64);
  if (h == 2) return float(t / 64);
  return float(int64_t((t * 7 + h * 3 + rank * 5) % 64) - 32);
}
uint8_t tag_fp8(int rank, int64_t t, int64_t h) { return uint8_t((rank * 37 + t * 11 + h * 5) % 0x7E); }
float tag_scale(int rank, int64_t t, int64_t b) { return float(rank * 1000000 + t * 100 + b); }


Inputs make_inputs(const Problem& pb, int rank, int64_t seed_shift = 0) {
  Inputs in;
  const int64_t T = pb.tokens(rank), H = pb.hidden;
  in.x.resize(size_t(T * H));
  in.x8.resize(size_t(T * H));
  in.scales.resize(size_t(T * (H / 128)));
  in.idx.resize(size_t(T * pb.top_k));
  in.w.resize(size_t(T * pb.top_k));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      in.x[size_t(t * H + h)] = f32_to_bf16(tag(rank, t + seed_shift, h));
      in.x8[size_t(t * H + h)] = tag_fp8(rank, t + seed_shift, h);
    }
    for (int64_t b = 0; b < H / 128; ++b) in.scales[size_t(t * (H / 128) + b)] = tag_scale(rank, t + seed_shift, b);
    pb.route(rank, t, in.idx.data() + t * pb.top_k);
    for (int64_t j = 0; j < pb.top_k; ++j) in.w[size_t(t * pb.top_k + j)] = pb.weight(rank, t, j);
  }
  return in;
}


// The expected normal-mode receive of this rank (tests/ep/ep_reference.h).
Expected reference_dispatch(const Group& g, const Problem& pb, const Inputs& in, bool fp8) {
  return sol::ep::testing::reference_dispatch(g, in, pb.tokens(g.rank()), pb.hidden, pb.top_k, pb.experts / g.size(),
                                              fp8);
}


void check_normal(const Group& g, Checker& c, const Problem& pb, bool fp8) {
  const int R = g.size(), me = g.rank();
  const std::string what = std::string("normal ") + (fp8 ? "fp8 " : "bf16 ") + routing_name(pb.routing) +
                           " R=" + std::to_string(R) + (g.num_nodes() > 1 ? " multi-node" : "");
  ep::BufferConfig cfg;
  cfg.hidden = pb.hidden;
  cfg.num_experts = pb.experts;
  cfg.top_k = pb.top_k;
  cfg.dtype = fp8 ? DType::f8e4m3 : DType::bf16;
  cfg.max_tokens_per_rank = pb.max_tokens;
  ep::Buffer buf(g, cfg);
  const int64_t T = pb.tokens(me), H = pb.hidden, K = pb.top_k, L = pb.experts / R, S = H / 128;
  Inputs in = make_inputs(pb, me);
  Tensor idx(in.idx.data(), DType::i32, {T, K});
  Tensor w(in.w.data(), DType::f32, {T, K});
  Tensor x = fp8 ? Tensor(in.x8.data(), DType::f8e4m3, {T, H}) : Tensor(in.x.data(), DType::bf16, {T, H});
  Tensor xs(in.scales.data(), DType::f32, {T, S});

  const ep::DispatchLayout& layout = buf.get_dispatch_layout(idx);
  // Layout against a direct count.
  {
    std::vector<int32_t> per_rank(static_cast<size_t>(R)), per_expert(size_t(pb.experts));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int> hit(static_cast<size_t>(R));
      for (int64_t j = 0; j < K; ++j)
        if (int32_t e = in.idx[size_t(t * K + j)]; e >= 0) ++per_expert[size_t(e)], hit[size_t(e / L)] = 1;
      for (int d = 0; d < R; ++d) {
        per_rank[size_t(d)] += hit[size_t(d)];
        c.expect(layout.is_token_in_rank.data_as<uint8_t>()[t * R + d] == hit[size_t(d)], what + ": is_token_in_rank");
      }
    }
    c.expect(same(layout.num_tokens_per_rank.data(), per_rank.data(), per_rank.size() * 4), what + ": num_tokens_per_rank");
    c.expect(same(layout.num_tokens_per_expert.data(), per_expert.data(), per_expert.size() * 4),
             what + ": num_tokens_per_expert");
    int64_t node_total = 0;
    for (int64_t n = 0; n < layout.num_tokens_per_node.numel(); ++n) node_total += layout.num_tokens_per_node.data_as<int32_t>()[n];
    c.expect(layout.num_tokens_per_node.numel() == g.num_nodes() && node_total >= 0, what + ": num_tokens_per_node");
  }

  ep::DispatchHandle handle;
  const int64_t align = 4;
  ep::DispatchResult r = buf.dispatch(x, fp8 ? &xs : nullptr, idx, w, layout, handle, align);
  Expected ex = reference_dispatch(g, pb, in, fp8);
  const int64_t row_bytes = fp8 ? H : 2 * H;
  c.expect(r.recv_x.shape(0) == ex.rows && handle.num_recv_tokens() == ex.rows,
           what + ": received " + std::to_string(r.recv_x.shape(0)) + " rows, expected " + std::to_string(ex.rows));
  if (r.recv_x.shape(0) == ex.rows) {
    c.expect(same(r.recv_x.data(), ex.x.data(), size_t(ex.rows * row_bytes)), what + ": recv_x");
    if (fp8) c.expect(same(r.recv_x_scales.data(), ex.scales.data(), ex.scales.size()), what + ": recv_x_scales");
    c.expect(same(r.recv_topk_idx.data(), ex.idx.data(), ex.idx.size() * 4), what + ": recv_topk_idx");
    c.expect(same(r.recv_topk_weights.data(), ex.w.data(), ex.w.size() * 4), what + ": recv_topk_weights");
  }
  std::vector<int64_t> per_local(static_cast<size_t>(L));
  for (int32_t e : ex.idx)
    if (e >= 0) ++per_local[size_t(e)];
  bool counts_ok = r.num_recv_tokens_per_expert.numel() == L;
  for (int64_t e = 0; counts_ok && e < L; ++e)
    counts_ok = r.num_recv_tokens_per_expert.data_as<int32_t>()[e] == (per_local[size_t(e)] + align - 1) / align * align;
  c.expect(counts_ok, what + ": num_recv_tokens_per_expert (padded to " + std::to_string(align) + ")");

  // combine(dispatch(x)) = x times the number of distinct destination ranks, exactly; x made with
  // make_inputs(pb, me, shift).
  auto expect_combine_of = [&](const ep::DispatchResult& dispatched, int64_t shift, const std::string& label) {
    std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
    buf.combine(dispatched.recv_x, handle, Tensor(out.data(), DType::bf16, {T, H}));
    bool ok = true;
    for (int64_t t = 0; t < T && ok; ++t) {
      int dests = 0;
      for (int d = 0; d < R; ++d) dests += layout.is_token_in_rank.data_as<uint8_t>()[t * R + d];
      for (int64_t h = 0; h < H && ok; ++h)
        ok = bf16_to_f32(out[size_t(t * H + h)]) == float(dests) * tag(me, t + shift, h);
      if (!ok) c.expect(false, what + ": " + label + " token " + std::to_string(t));
    }
    c.expect(ok, what + ": " + label + " = x * destinations");
  };
  if (!fp8) expect_combine_of(r, 0, "combine(dispatch(x))");

  // Cached dispatch: the same routing, a new payload (tokens shifted by 1000).
  Inputs in2 = make_inputs(pb, me, 1000);
  Tensor x2 = fp8 ? Tensor(in2.x8.data(), DType::f8e4m3, {T, H}) : Tensor(in2.x.data(), DType::bf16, {T, H});
  Tensor xs2(in2.scales.data(), DType::f32, {T, S});
  ep::DispatchResult r2 = buf.dispatch(x2, fp8 ? &xs2 : nullptr, handle);
  Expected ex2 = reference_dispatch(g, pb, in2, fp8);
  c.expect(r2.recv_x.shape(0) == ex2.rows && same(r2.recv_x.data(), ex2.x.data(), size_t(ex2.rows * row_bytes)),
           what + ": cached dispatch recv_x");
  if (fp8) c.expect(same(r2.recv_x_scales.data(), ex2.scales.data(), ex2.scales.size()), what + ": cached recv_x_scales");
  // A second combine on the same handle (the region is reused safely).
  if (!fp8) expect_combine_of(r2, 1000, "combine after cached dispatch");
}

// Low-latency mode: packed per-expert rows in (source rank, token) order, recv_count, and the
// weighted combine; two dispatches in flight alternate buffers.
void check_low_latency(const Group& g, Checker& c, const Problem& pb, bool fp8) {
  const int R = g.size(), me = g.rank();
  const std::string what = std::string("low-latency ") + (fp8 ? "fp8 " : "bf16 ") + routing_name(pb.routing) +
                           " R=" + std::to_string(R);
  ep::BufferConfig cfg;
  cfg.hidden = pb.hidden;
  cfg.num_experts = pb.experts;
  cfg.top_k = pb.top_k;
  cfg.dtype = fp8 ? DType::f8e4m3 : DType::bf16;
  cfg.max_tokens_per_rank = 0;
  cfg.low_latency_max_tokens = pb.max_tokens;
  ep::Buffer buf(g, cfg);
  const int64_t H = pb.hidden, K = pb.top_k, L = pb.experts / R, slots = R * pb.max_tokens, S = H / 128;

  auto expect_received = [&](const ep::LowLatencyResult& r, int64_t shift, const std::string& label) {
    bool ok = true;
    for (int64_t le = 0; le < L; ++le) {
      int64_t row = 0;
      for (int p = 0; p < R; ++p) {
        Inputs src = make_inputs(pb, p, shift);
        const int64_t Tp = pb.tokens(p);
        std::vector<uint8_t> q(size_t(std::max<int64_t>(Tp * H, 1)));
        std::vector<float> qs(size_t(std::max<int64_t>(Tp * S, 1)));
        if (fp8 && Tp > 0)
          quant_fp8_per_token(Tensor(src.x.data(), DType::bf16, {Tp, H}), Tensor(q.data(), DType::f8e4m3, {Tp, H}),
                              Tensor(qs.data(), DType::f32, {Tp, S}));
        for (int64_t t = 0; t < Tp; ++t)
          for (int64_t j = 0; j < K; ++j) {
            if (src.idx[size_t(t * K + j)] != me * L + le) continue;
            if (row < slots) {
              const std::byte* got = static_cast<const std::byte*>(r.recv_x.data()) + (le * slots + row) * (fp8 ? H : 2 * H);
              ok &= fp8 ? same(got, q.data() + t * H, size_t(H)) && same(r.recv_x_scales.data_as<float>() + (le * slots + row) * S, qs.data() + t * S, size_t(S * 4))
                        : same(got, src.x.data() + t * H, size_t(2 * H));
            }
            ++row;
          }
      }
      ok &= r.recv_count.data_as<int32_t>()[le] == row;
    }
    c.expect(ok, what + ": " + label);
  };
  auto expect_combined = [&](const ep::LowLatencyResult& r, const ep::LowLatencyHandle& h, const Inputs& in,
                             int64_t T, const std::string& label) {
    std::vector<uint16_t> y(size_t(L * slots * H));
    // y = recv_x (bf16), or its dequantized fp8 rows.
    if (fp8) dequant_fp8_per_token(r.recv_x.reshape({L * slots, H}), r.recv_x_scales.reshape({L * slots, S}),
                                   Tensor(y.data(), DType::bf16, {L * slots, H}));
    else std::memcpy(y.data(), r.recv_x.data(), y.size() * 2);
    std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)), 0xFFFF);
    buf.low_latency_combine(Tensor(y.data(), DType::bf16, {L, slots, H}), Tensor(const_cast<int32_t*>(in.idx.data()), DType::i32, {T, K}),
                            Tensor(const_cast<float*>(in.w.data()), DType::f32, {T, K}), h,
                            Tensor(out.data(), DType::bf16, {T, H}));
    // Reference: the same sum of this rank's own rows (dequantized the same way for fp8).
    std::vector<uint16_t> xr(in.x);
    if (fp8 && T > 0) {
      std::vector<uint8_t> q(size_t(T * H));
      std::vector<float> qs(size_t(T * S));
      quant_fp8_per_token(Tensor(const_cast<uint16_t*>(in.x.data()), DType::bf16, {T, H}), Tensor(q.data(), DType::f8e4m3, {T, H}),
                          Tensor(qs.data(), DType::f32, {T, S}));
      dequant_fp8_per_token(Tensor(q.data(), DType::f8e4m3, {T, H}), Tensor(qs.data(), DType::f32, {T, S}),
                            Tensor(xr.data(), DType::bf16, {T, H}));
    }
    bool ok = true;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hh = 0; hh < H; ++hh) {
        float acc = 0;
        for (int64_t j = 0; j < K; ++j)
          if (in.idx[size_t(t * K + j)] >= 0) acc += in.w[size_t(t * K + j)] * bf16_to_f32(xr[size_t(t * H + hh)]);
        ok &= out[size_t(t * H + hh)] == f32_to_bf16(acc);
      }
    c.expect(ok, what + ": " + label);
  };

  const int64_t T = pb.tokens(me);
  Inputs a = make_inputs(pb, me), b = make_inputs(pb, me, 1000);
  ep::LowLatencyHandle ha, hb;
  ep::LowLatencyResult ra = buf.low_latency_dispatch(Tensor(a.x.data(), DType::bf16, {T, H}),
                                                     Tensor(a.idx.data(), DType::i32, {T, K}), ha);
  expect_received(ra, 0, "dispatch");
  // The next micro-batch in flight (async) while the first one's results are still read.
  ep::LowLatencyResult rb = buf.low_latency_dispatch(Tensor(b.x.data(), DType::bf16, {T, H}),
                                                     Tensor(b.idx.data(), DType::i32, {T, K}), hb, true);
  c.expect(hb.pending(), what + ": async handle pending");
  expect_combined(ra, ha, a, T, "combine of micro-batch 0 while 1 is in flight");
  hb.wait();
  expect_received(ra, 0, "micro-batch 0 intact after dispatch 1");
  expect_received(rb, 1000, "dispatch (second buffer)");
  expect_combined(rb, hb, b, T, "combine of micro-batch 1");
  // A third dispatch reuses the first buffer.
  ep::LowLatencyHandle hc;
  ep::LowLatencyResult rc = buf.low_latency_dispatch(Tensor(a.x.data(), DType::bf16, {T, H}),
                                                     Tensor(a.idx.data(), DType::i32, {T, K}), hc);
  expect_received(rc, 0, "dispatch 2 (first buffer again)");
  expect_combined(rc, hc, a, T, "combine of micro-batch 2");
  bool stale = false;
  try {
    std::vector<uint16_t> out(size_t(std::max<int64_t>(T * H, 1)));
    std::vector<uint16_t> y(size_t(L * slots * H));
    buf.low_latency_combine(Tensor(y.data(), DType::bf16, {L, slots, H}), Tensor(a.idx.data(), DType::i32, {T, K}),
                            Tensor(a.w.data(), DType::f32, {T, K}), ha, Tensor(out.data(), DType::bf16, {T, H}));
  } catch (const Error&) {
    stale = true;
  }
  c.expect(stale, what + ": a stale handle is refused");
}

void check_bad_input(const Group& g, Checker& c) {
  ep::BufferConfig cfg;
  cfg.hidden = 128;
  cfg.num_experts = 4 * g.size();
  cfg.top_k = 2;
  cfg.max_tokens_per_rank = 8;
  ep::Buffer buf(g, cfg);
  std::vector<int32_t> idx = {0, 1, 2, int32_t(cfg.num_experts)};  // out of range
  bool threw = false;
  try {
    buf.get_dispatch_layout(Tensor(idx.data(), DType::i32, {2, 2}));
  } catch (const Error& e) {
    threw = std::string(e.what()).find("topk_idx[1, 1]") != std::string::npos;
  }
  c.expect(threw, "bad expert id is named");
  threw = false;
  std::vector<int32_t> many(20, 0);
  try {
    buf.get_dispatch_layout(Tensor(many.data(), DType::i32, {10, 2}));
  } catch (const Error&) {
    threw = true;
  }
  c.expect(threw, "more tokens than max_tokens_per_rank");
  threw = false;
  try {
    ep::BufferConfig odd = cfg;
    odd.num_experts = 4 * g.size() + 1;
    ep::Buffer bad(g, odd);
  } catch (const Error& e) {
    threw = std::string(e.what()).find("num_experts") != std::string::npos;
  }
  c.expect(threw, "num_experts not a multiple of the ranks");
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker c(world.rank());
  const int R = world.size();
  for (Routing routing : kRoutings) {
    Problem pb{R, 256, int64_t(8) * R, 4, 37, routing};
    for (bool fp8 : {false, true}) check_normal(world, c, pb, fp8);
  }
  // A wider shape, more tokens per rank than one chunk of anything.
  check_normal(world, c, Problem{R, 7168, int64_t(16) * R, 8, 130, Routing::random}, false);
  if (world.num_nodes() == 1) {
    for (Routing routing : kRoutings) {
      Problem pb{R, 256, int64_t(4) * R, 3, 9, routing};
      for (bool fp8 : {false, true}) check_low_latency(world, c, pb, fp8);
    }
  } else {
    bool threw = false;
    try {
      ep::BufferConfig cfg;
      cfg.hidden = 128;
      cfg.num_experts = R;
      cfg.top_k = 1;
      cfg.low_latency_max_tokens = 4;
      ep::Buffer ll(world, cfg);
    } catch (const Error&) {
      threw = true;
    }
    c.expect(threw, "low-latency mode across nodes is refused with an error");
  }
  check_bad_input(world, c);
  return c.finish(world.num_nodes() > 1 ? "mpi_ep (multi-node)" : "mpi_ep");
}
