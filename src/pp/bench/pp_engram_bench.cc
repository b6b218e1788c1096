// The sweeps of `sol comm bench pp-sendrecv | engram-lookup` (see pp_engram_bench.h).
#include "pp/bench/pp_engram_bench.h"


#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "comm/bench/agree.h"
#include "comm/bench/batch_timing.h"
#include "comm/group_state.h"
#include "sol/engram.h"
#include "sol/error.h"
#include "sol/pp.h"
#include "sol/timing.h"

namespace sol::comm {

namespace {

constexpr int kMicroBatches = 16;
constexpr int64_t kEngramDim = 128;

struct Timed {
  std::function<void()> run;
  std::function<void()> poison;
  std::function<int64_t()> wrong;  // this rank's wrong elements since the last poison
};

// Median over batches of the slowest rank's mean call; wrong counted before and after.
CommTiming measure(const Group& g, Timed& t, size_t bytes, double factor, int iters, int batches) {
  t.poison();
  t.run();
  int64_t wrong = t.wrong();
  t.run();
  CommTiming r;
  r.time_s = detail::time_batches(g, t.run, iters, batches);
  wrong += t.wrong();
  r.wrong = detail::sum_over(g, wrong);
  r.algbw = r.time_s > 0 ? double(bytes) / r.time_s / 1e9 : 0;
  r.busbw = r.algbw * factor;
  return r;
}

double tag_value(int mb, int64_t i) { return double((mb * 31 + i * 7) % 89 - 44); }

// A 1F1B step whose stages pass their boundary tensor on, checking what arrives.
struct PipelineCase {
  std::unique_ptr<pp::Pipeline> pipe;
  pp::StageFns fns;
  int64_t n = 0;
  DType dtype;
  bool full = true;  // write and check every element (else the tags at both ends)
  int64_t wrong = 0;

  void write(const Tensor& t, int mb) const {
    if (full)
      for (int64_t i = 0; i < n; ++i) store_from_double(t.data(), dtype, size_t(i), tag_value(mb, i));
    else {
      store_from_double(t.data(), dtype, 0, tag_value(mb, 0));
      store_from_double(t.data(), dtype, size_t(n - 1), tag_value(mb, n - 1));
    }
  }
  void expect(const Tensor& t, int mb) {
    if (full)
      for (int64_t i = 0; i < n; ++i) wrong += load_as_double(t.data(), dtype, size_t(i)) != tag_value(mb, i);
    else
      wrong += (load_as_double(t.data(), dtype, 0) != tag_value(mb, 0)) +
               (load_as_double(t.data(), dtype, size_t(n - 1)) != tag_value(mb, n - 1));
  }

  PipelineCase(const Group& g, DType dt, int64_t elements) : n(elements), dtype(dt) {
    pp::PipelineOptions o;
    o.micro_batches = kMicroBatches;
    o.boundary_shape = {elements};
    o.dtype = dt;
    pipe = std::make_unique<pp::Pipeline>(g, o);
    fns.forward = [this](const pp::StageCall& c, const Tensor& x, const Tensor& y) {
      if (!c.first) expect(x, c.micro_batch);
      if (!c.last) write(y, c.micro_batch);
    };
    fns.backward_input = [this](const pp::StageCall& c, const Tensor& dy, const Tensor& dx) {
      if (!c.last) expect(dy, c.micro_batch + 1000);
      if (!c.first) write(dx, c.micro_batch + 1000);
    };
  }
};

Timed pipeline_timed(const std::shared_ptr<PipelineCase>& c) {
  return {[c] { c->pipe->run(c->fns); c->full = false; },
          [c] { c->full = true; c->wrong = 0; },
          [c] { int64_t w = c->wrong; c->wrong = 0; return w; }};
}

Timed engram_timed(const Group& g, DType dt, int64_t lookups, std::shared_ptr<void>& keep) {
  const int P = g.size(), me = g.rank();
  const int64_t rows = std::max<int64_t>(2 * lookups * P, P);
  auto table = std::make_shared<engram::ShardedTable>(g, rows, kEngramDim, dt);
  auto value = [](int64_t r, int64_t e) { return double((r * 13 + e * 7) % 97 - 48); };
  const Tensor& local = table->local();
  const int64_t first = table->row_begin(me);
  for (int64_t r = 0; r < local.shape(0); ++r)
    for (int64_t e = 0; e < kEngramDim; ++e)
      store_from_double(local.data(), dt, size_t(r * kEngramDim + e), value(first + r, e));
  auto idx = std::make_shared<Buffer>(DType::i32, std::initializer_list<int64_t>{lookups, 1});
  auto out = std::make_shared<Buffer>(dt, std::initializer_list<int64_t>{lookups, 1, kEngramDim});
  uint64_t x = 0x1234567ull + uint64_t(me) * 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < lookups; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    idx->tensor().data_as<int32_t>()[i] = int32_t((x >> 33) % uint64_t(rows));
  }
  keep = table;
  return {[table, idx, out] { table->lookup(*idx, *out); },
          [out] { std::memset(out->data(), 0xFF, out->bytes()); },
          [idx, out, dt, value] {
            int64_t wrong = 0;
            const int64_t n = idx->tensor().numel();
            for (int64_t i = 0; i < n; ++i)
              for (int64_t e = 0; e < kEngramDim; ++e)
                wrong += load_as_double(out->data(), dt, size_t(i * kEngramDim + e)) !=
                         value(idx->tensor().data_as<int32_t>()[i], e);
            return wrong;
          }};
}

}  // namespace

bool is_pipeline_bench_op(std::string_view op) {
  for (const char* k : kPipelineBenchOps)
    if (op == k) return true;
  return false;
}

std::vector<CommBenchRecord> pipeline_bench(const Group& g, const CommBenchOptions& o) {
  check(is_pipeline_bench_op(o.op), "comm bench", "'", o.op, "' is not pp-sendrecv or engram-lookup");
  check(g.size() >= 2, "comm bench", o.op, " needs at least 2 ranks");
  check(o.min_bytes <= o.max_bytes, "comm bench", "--min-bytes ", o.min_bytes, " is above --max-bytes ", o.max_bytes);
  check(o.max_bytes <= (size_t(1) << 30), "comm bench", "--max-bytes ", o.max_bytes, " is above 1 GiB");
  const bool pp = o.op == "pp-sendrecv";
  const size_t es = dtype_size(o.dtype);
  const double factor = 1.0;  // both: one copy of `bytes` per rank (pp_engram_bench.h)
  std::vector<CommBenchRecord> records;
  for (size_t bytes = std::max<size_t>(o.min_bytes, 8); bytes <= o.max_bytes; bytes *= size_t(o.factor)) {
    // One element holds the tags at both ends: at least two; engram: whole rows.
    const int64_t unit = pp ? 1 : kEngramDim;
    const int64_t count = std::max<int64_t>(pp ? 2 : kEngramDim, int64_t(bytes / es) / unit * unit);
    const size_t real_bytes = size_t(count) * es;
    const size_t per_call = pp ? real_bytes * kMicroBatches : real_bytes;
    const int iters = o.iters > 0 ? o.iters : int(std::clamp<size_t>((size_t(128) << 20) / per_call, 3, 1000));
    const double ceiling = interprocess_copy_ceiling(g, std::max<size_t>(size_t(double(real_bytes) * factor), 8), iters,
                                                     o.batches);
    CommBenchRecord r;
    r.op = o.op;
    r.dtype = std::string(dtype_name(o.dtype));
    r.count = count;
    r.bytes = real_bytes;
    r.ranks = g.size();
    r.nodes = g.num_nodes();
    r.ceiling_gbps = ceiling / 1e9;
    if (pp) {
      auto c = std::make_shared<PipelineCase>(g, o.dtype, count);
      Timed t = pipeline_timed(c);
      r.sol = measure(g, t, real_bytes, factor, iters, o.batches);
      // Per micro-batch: the step's time over its micro-batches.
      r.sol.time_s /= kMicroBatches;
      r.sol.algbw *= kMicroBatches;
      r.sol.busbw *= kMicroBatches;
    } else {
      std::shared_ptr<void> keep;
      Timed t = engram_timed(g, o.dtype, count / kEngramDim, keep);
      r.sol = measure(g, t, real_bytes, factor, iters, o.batches);
    }
    r.sol_pct = r.ceiling_gbps > 0 ? 100 * r.sol.busbw / r.ceiling_gbps : 0;
    records.push_back(r);
    if (bytes > o.max_bytes / size_t(o.factor)) break;
  }
  return records;
}

}  // namespace sol::comm
