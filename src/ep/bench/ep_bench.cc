// The sweeps of `sol comm bench ep-*` (see ep_bench.h).
#include "ep/bench/ep_bench.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>

#include "comm/bench/agree.h"
#include "comm/bench/batch_timing.h"
#include "ep/bench/ep_ceiling.h"
#include "comm/group_state.h"
#include "sol/dtype.h"
#include "sol/ep.h"
#include "sol/error.h"
#include "sol/timing.h"

namespace sol::comm {

namespace {

struct Shape {
  int64_t hidden = 7168, experts = 256, top_k = 8, min_tokens = 0, max_tokens = 0;
};

Shape shape_from_env(bool low_latency) {
  Shape s;
  s.min_tokens = low_latency ? 1 : 128;
  s.max_tokens = low_latency ? 128 : 4096;
  const char* text = std::getenv("SOL_EP_BENCH");
  if (!text || !*text) return s;
  std::istringstream in(text);
  int64_t v[5];
  char comma;
  for (int i = 0; i < 5; ++i)
    if (!(in >> v[i]) || (i < 4 && !(in >> comma))) fail("comm bench", "SOL_EP_BENCH = '", text,
                                                          "': expected hidden,experts,top_k,min_tokens,max_tokens");
  return Shape{v[0], v[1], v[2], v[3], v[4]};
}

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

// Uniform top-k without repeats, the same on every rank for (rank, token).
void route(const Shape& s, int rank, int64_t t, int32_t* out) {
  for (int64_t j = 0; j < s.top_k; ++j) {
    for (uint64_t attempt = 0;; ++attempt) {
      int32_t e = int32_t(mix(uint64_t(rank) << 44 ^ uint64_t(t) << 12 ^ uint64_t(j) << 6 ^ attempt) % uint64_t(s.experts));
      bool seen = false;
      for (int64_t i = 0; i < j; ++i) seen |= out[i] == e;
      if (!seen) {
        out[j] = e;
        break;
      }
    }
  }
}

// Row values: small integers tagging (rank, token) in the first three columns.
float tag(int rank, int64_t t, int64_t h) {
  if (h == 0) return float(rank);
  if (h == 1) return float(t % 64);
  if (h == 2) return float(t / 64);
  return float(int64_t((t + h) % 16) - 8);
}

int64_t sum_over_ranks(const Group& g, int64_t mine) {
  return detail::sum_over(g, mine);
}

CommTiming measure(const Group& g, const std::function<void()>& run, const std::function<int64_t()>& wrong,
                   double bytes, int iters, int batches) {
  run();
  int64_t bad = wrong();
  CommTiming r;
  r.time_s = detail::time_batches(g, run, iters, batches);
  bad += wrong();
  r.wrong = sum_over_ranks(g, bad);
  r.algbw = r.time_s > 0 ? bytes / r.time_s / 1e9 : 0;
  r.busbw = r.algbw;
  return r;
}

struct Inputs {
  std::vector<uint16_t> x;
  std::vector<uint8_t> x8;
  std::vector<float> scales, w;
  std::vector<int32_t> idx;
};

Inputs make_inputs(const Shape& s, int rank, int64_t T) {
  Inputs in;
  const int64_t H = s.hidden, S = H / 128;
  in.x.resize(size_t(T * H));
  in.x8.resize(size_t(T * H));
  in.scales.resize(size_t(T * S));
  in.idx.resize(size_t(T * s.top_k));
  in.w.assign(size_t(T * s.top_k), 0.125f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      in.x[size_t(t * H + h)] = f32_to_bf16(tag(rank, t, h));
      in.x8[size_t(t * H + h)] = f32_to_e4m3(tag(rank, t, h));
    }
    for (int64_t b = 0; b < S; ++b) in.scales[size_t(t * S + b)] = float(rank * 100000 + t * 10 + b % 10);
    route(s, rank, t, in.idx.data() + t * s.top_k);
  }
  return in;
}

// Normal-mode received rows that are not the expected (source, token) in order.
int64_t wrong_normal_rows(const Shape& s, const Group& g, int64_t T, const ep::DispatchResult& r, bool fp8) {
  const int R = g.size(), me = g.rank();
  const int64_t L = s.experts / R, H = s.hidden;
  int64_t row = 0, wrong = 0;
  std::vector<int32_t> idx(size_t(s.top_k));
  for (int p = 0; p < R; ++p)
    for (int64_t t = 0; t < T; ++t) {
      route(s, p, t, idx.data());
      bool here = false;
      for (int32_t e : idx) here |= e / L == me;
      if (!here) continue;
      if (row < r.recv_x.shape(0)) {
        for (int64_t h = 0; h < 3; ++h) {
          const double v = load_as_double(r.recv_x.data(), fp8 ? DType::f8e4m3 : DType::bf16, size_t(row * H + h));
          const double ref = fp8 ? double(e4m3_to_f32(f32_to_e4m3(tag(p, t, h)))) : double(tag(p, t, h));
          wrong += v != ref;
        }
      }
      ++row;
    }
  return wrong + (row != r.recv_x.shape(0) ? 1 : 0);
}

// The fields every EP record shares once its timing is in; SOL% against the paired ceiling.
CommBenchRecord finish_record(CommBenchRecord rec, const char* op, bool fp8, int64_t bytes, int64_t tokens,
                              const Group& g, double ceiling) {
  rec.op = op;
  rec.dtype = fp8 ? "f8e4m3" : "bf16";
  rec.bytes = size_t(bytes);
  rec.count = tokens;
  rec.ranks = g.size();
  rec.nodes = g.num_nodes();
  rec.ceiling_gbps = ceiling / 1e9;
  rec.sol_pct = rec.ceiling_gbps > 0 ? 100 * rec.sol.busbw / rec.ceiling_gbps : 0;
  return rec;
}

std::vector<CommBenchRecord> normal_sweep(const Group& g, const CommBenchOptions& o, const Shape& s, bool combine,
                                          bool in_place) {
  const bool fp8 = o.dtype == DType::f8e4m3 && !combine;
  std::vector<CommBenchRecord> out;
  for (int64_t T = s.min_tokens; T <= s.max_tokens; T *= std::max(o.factor, 2)) {
    const int R = g.size(), me = g.rank();
    const int64_t H = s.hidden, K = s.top_k, S = H / 128;
    Inputs in = make_inputs(s, me, T);
    // Bytes first (routing is known), then the ceiling: it resets the heap, so before the buffer.
    std::vector<int32_t> idx(static_cast<size_t>(K));
    int64_t recv_rows = 0, sent_rows = 0;
    for (int p = 0; p < R; ++p)
      for (int64_t t = 0; t < T; ++t) {
        route(s, p, t, idx.data());
        std::vector<bool> to(static_cast<size_t>(R), false);
        for (int32_t e : idx) to[size_t(e / (s.experts / R))] = true;
        recv_rows += to[size_t(me)];
        if (p == me) sent_rows += std::count(to.begin(), to.end(), true);
      }
    const int64_t row_bytes = fp8 ? H + S * 4 : 2 * H;
    const double bytes = double(sum_over_ranks(g, recv_rows * row_bytes)) / R;
    const int iters = o.iters > 0 ? o.iters : int(std::clamp<double>(double(256 << 20) / std::max(bytes, 1.0), 3, 200));
    // Dispatch: the same puts without synchronisation (each token's row read once, written to
    // its ≈ sent_rows / T destinations). Combine: the copy of the rows (DeepEP's definition).
    const int fanout = int(std::lround(double(sent_rows) / double(std::max<int64_t>(T, 1))));
    const double ceiling = combine ? interprocess_copy_ceiling(g, size_t(bytes), iters, o.batches)
                                   : ep_put_ceiling(g, T, row_bytes, fanout, iters, o.batches);

    ep::BufferConfig cfg;
    cfg.hidden = H;
    cfg.num_experts = s.experts;
    cfg.top_k = K;
    cfg.dtype = fp8 ? DType::f8e4m3 : DType::bf16;
    cfg.max_tokens_per_rank = T;
    CommBenchRecord rec;
    {
      ep::Buffer buf(g, cfg);
      Tensor x = fp8 ? Tensor(in.x8.data(), DType::f8e4m3, {T, H}) : Tensor(in.x.data(), DType::bf16, {T, H});
      Tensor xs(in.scales.data(), DType::f32, {T, S});
      Tensor ti(in.idx.data(), DType::i32, {T, K}), tw(in.w.data(), DType::f32, {T, K});
      const ep::DispatchLayout& layout = buf.get_dispatch_layout(ti);
      ep::DispatchHandle handle;
      ep::DispatchResult r;
      std::vector<uint16_t> combined(size_t(T * H));
      auto dispatch = [&] { r = buf.dispatch(x, fp8 ? &xs : nullptr, ti, tw, layout, handle); };
      dispatch();
      // y: the received rows, copied out of the buffer (so the timed combine reads user memory),
      // or into its combine_buffer() for the in-place combine.
      std::vector<uint16_t> y;
      Tensor y_view;
      if (combine && in_place) {
        y_view = buf.combine_buffer(handle);
        std::memcpy(y_view.data(), r.recv_x.data(), size_t(r.recv_x.numel()) * 2);
      } else if (combine) {
        y.assign(r.recv_x.data_as<uint16_t>(), r.recv_x.data_as<uint16_t>() + r.recv_x.numel());
        y_view = Tensor(y.data(), DType::bf16, {handle.num_recv_tokens(), H});
      }
      auto run_combine = [&] { buf.combine(y_view, handle, Tensor(combined.data(), DType::bf16, {T, H})); };
      auto wrong = [&]() -> int64_t {
        if (!combine) return wrong_normal_rows(s, g, T, r, fp8);
        int64_t bad = 0;
        const uint8_t* in_rank = layout.is_token_in_rank.data_as<const uint8_t>();
        for (int64_t t = 0; t < T; ++t) {
          int dests = 0;
          for (int d = 0; d < R; ++d) dests += in_rank[t * R + d];
          for (int64_t h = 0; h < H; ++h) bad += bf16_to_f32(combined[size_t(t * H + h)]) != float(dests) * tag(me, t, h);
        }
        std::fill(combined.begin(), combined.end(), uint16_t(0xFFFF));
        return bad;
      };
      if (combine) std::fill(combined.begin(), combined.end(), uint16_t(0xFFFF));
      rec.sol = combine ? measure(g, run_combine, wrong, bytes, iters, o.batches)
                        : measure(g, dispatch, wrong, bytes, iters, o.batches);
    }
    g.barrier();
    g.heap_reset();
    out.push_back(finish_record(rec, combine ? (in_place ? "ep-combine-inplace" : "ep-combine") : "ep-dispatch", fp8,
                                bytes, T, g, ceiling));
  }
  return out;
}

std::vector<CommBenchRecord> low_latency_sweep(const Group& g, const CommBenchOptions& o, const Shape& s, bool combine) {
  const bool fp8 = o.dtype == DType::f8e4m3 && !combine;
  std::vector<CommBenchRecord> out;
  for (int64_t T = s.min_tokens; T <= s.max_tokens; T *= std::max(o.factor, 2)) {
    const int R = g.size(), me = g.rank();
    const int64_t H = s.hidden, K = s.top_k, S = H / 128, L = s.experts / R, slots = R * T;
    Inputs in = make_inputs(s, me, T);
    const int64_t row_bytes = combine ? 2 * H : fp8 ? H + S * 4 : 2 * H;
    const double bytes = double(sum_over_ranks(g, T * K * row_bytes)) / R;
    const int iters = o.iters > 0 ? o.iters : int(std::clamp<double>(double(256 << 20) / std::max(bytes, 1.0), 3, 2000));
    // Dispatch: each token's row put to its top_k experts; combine: the copy of the rows.
    const double ceiling = combine ? interprocess_copy_ceiling(g, size_t(bytes), iters, o.batches)
                                   : ep_put_ceiling(g, T, row_bytes, int(K), iters, o.batches);

    ep::BufferConfig cfg;
    cfg.hidden = H;
    cfg.num_experts = s.experts;
    cfg.top_k = K;
    cfg.dtype = fp8 ? DType::f8e4m3 : DType::bf16;
    cfg.max_tokens_per_rank = 0;
    cfg.low_latency_max_tokens = T;
    CommBenchRecord rec;
    {
      ep::Buffer buf(g, cfg);
      Tensor x(in.x.data(), DType::bf16, {T, H});
      Tensor ti(in.idx.data(), DType::i32, {T, K}), tw(in.w.data(), DType::f32, {T, K});
      ep::LowLatencyHandle handle;
      ep::LowLatencyResult r;
      auto dispatch = [&] { r = buf.low_latency_dispatch(x, ti, handle); };
      dispatch();
      std::vector<uint16_t> y, combined(size_t(T * H));
      if (combine) y.assign(r.recv_x.data_as<uint16_t>(), r.recv_x.data_as<uint16_t>() + r.recv_x.numel());
      auto run_combine = [&] {
        buf.low_latency_combine(Tensor(y.data(), DType::bf16, {L, slots, H}), ti, tw, handle,
                                Tensor(combined.data(), DType::bf16, {T, H}));
      };
      auto wrong = [&]() -> int64_t {
        int64_t bad = 0;
        if (combine) {
          // Weights 1/8: out = x exactly when all top_k choices are kept.
          for (int64_t i = 0; i < T * H; ++i) bad += bf16_to_f32(combined[size_t(i)]) != tag(me, i / H, i % H) * 0.125f * float(K);
          std::fill(combined.begin(), combined.end(), uint16_t(0xFFFF));
          return bad;
        }
        std::vector<int32_t> idx(static_cast<size_t>(K));
        for (int64_t le = 0; le < L; ++le) {
          int64_t row = 0;
          for (int p = 0; p < R; ++p)
            for (int64_t t = 0; t < T; ++t) {
              route(s, p, t, idx.data());
              for (int32_t e : idx) {
                if (e != me * L + le) continue;
                for (int64_t h = 0; h < 3 && row < slots; ++h) {
                  const size_t at = size_t((le * slots + row) * H + h);
                  const double v = fp8 ? double(e4m3_to_f32(r.recv_x.data_as<uint8_t>()[at])) *
                                             r.recv_x_scales.data_as<float>()[(le * slots + row) * S]
                                       : double(bf16_to_f32(r.recv_x.data_as<uint16_t>()[at]));
                  // fp8 rows are quantized: compare within e4m3's relative step.
                  const double ref = tag(p, t, h);
                  bad += fp8 ? std::abs(v - ref) > 0.07 * std::abs(ref) + 1e-6 : v != ref;
                }
                ++row;
              }
            }
          bad += r.recv_count.data_as<int32_t>()[le] != row;
        }
        return bad;
      };
      if (combine) std::fill(combined.begin(), combined.end(), uint16_t(0xFFFF));
      rec.sol = combine ? measure(g, run_combine, wrong, bytes, iters, o.batches)
                        : measure(g, dispatch, wrong, bytes, iters, o.batches);
    }
    g.barrier();
    g.heap_reset();
    out.push_back(finish_record(rec, combine ? "ep-ll-combine" : "ep-ll-dispatch", fp8, bytes, T, g, ceiling));
  }
  return out;
}

}  // namespace

bool is_ep_bench_op(std::string_view op) {
  for (const char* name : kEpBenchOps)
    if (op == name) return true;
  return false;
}

std::vector<CommBenchRecord> ep_bench(const Group& group, const CommBenchOptions& o) {
  check(o.dtype == DType::f32 || o.dtype == DType::bf16 || o.dtype == DType::f8e4m3, "comm bench",
        "--dtype ", dtype_name(o.dtype), " for ", o.op, ": expected bf16 or f8e4m3 (fp8 dispatch payloads)");
  const bool ll = o.op == "ep-ll-dispatch" || o.op == "ep-ll-combine";
  const bool in_place = o.op == "ep-combine-inplace";
  const bool combine = o.op == "ep-combine" || o.op == "ep-ll-combine" || in_place;
  check(!in_place || group.num_nodes() == 1, "comm bench", o.op, " needs every rank on one node (the group spans ",
        group.num_nodes(), ")");
  const Shape s = shape_from_env(ll);
  check(s.experts % group.size() == 0, "comm bench", o.op, ": ", s.experts, " experts do not split over ",
        group.size(), " ranks");
  if (group.num_nodes() > 1 && group.rank() == 0)
    std::fprintf(stderr, "note: %d nodes: dispatch and combine are hierarchical (one cross-node transfer per token "
                         "and destination node), but bytes and ceiling are still the intra-node ones; "
                         "ep::Buffer::last_dispatch_traffic() gives the cross-node volume\n",
                 group.num_nodes());
  std::vector<CommBenchRecord> records =
      ll ? low_latency_sweep(group, o, s, combine) : normal_sweep(group, o, s, combine, in_place);
  // A SOL% above 100 means the ceiling is not this op's limit: say so next to the table.
  for (const CommBenchRecord& r : records)
    if (r.sol_pct > 100 && group.rank() == 0)
      std::fprintf(stderr, "!! %s %lld tokens/rank: SOL%% %.1f > 100: %s\n", r.op.c_str(), (long long)r.count, r.sol_pct,
                   in_place ? "the in-place combine reads the rows once and writes one per token, fewer bytes than the "
                              "copy ceiling moves; it can pass the copy"
                            : "the paired ceiling was measured in a slower moment than the op (noisy machine); "
                              "rerun, or read the rows around it");
  return records;
}

}  // namespace sol::comm
