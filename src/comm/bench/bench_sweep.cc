// The sweep: per size, the paired copy ceiling, then Sol's op (and Open MPI's), each checked
// and timed in batches (batch_timing.h).

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "comm/bench/agree.h"
#include "comm/bench/batch_timing.h"
#include "comm/bench/bench_case.h"
#include "comm/mpi_deadline.h"
#include "sol/comm_bench.h"
#include "sol/timing.h"

namespace sol::comm {

namespace detail {

// Enough iterations per batch that a batch lasts about a millisecond or more.
int iterations_for(size_t bytes, int requested) {
  if (requested > 0) return requested;
  const size_t budget = size_t(256) << 20;
  return int(std::clamp<size_t>(budget / std::max<size_t>(bytes, 1), 5, 2000));
}

// Checked once before the timed batches (on poisoned outputs) and once on the output of the
// last timed call.
CommTiming measure(const Group& g, BenchCase& c, const std::function<void()>& run, size_t bytes,
                   double factor, int iters, int batches) {
  c.poison();
  run();
  int64_t wrong = c.wrong();
  run();
  CommTiming t;
  c.poison();
  t.time_s = time_batches(g, run, iters, batches);
  wrong += c.wrong();
  t.wrong = sum_over(g, wrong);
  t.algbw = t.time_s > 0 ? double(bytes) / t.time_s / 1e9 : 0;
  t.busbw = t.algbw * factor;
  return t;
}

}  // namespace detail

double bus_factor(std::string_view op, int ranks) {
  const double n = ranks;
  if (op == "allreduce") return 2 * (n - 1) / n;
  if (op == "broadcast" || op == "sendrecv") return 1;
  return (n - 1) / n;
}

std::vector<CommBenchRecord> comm_bench(const Group& g, const CommBenchOptions& o) {
  check(o.min_bytes <= o.max_bytes, "comm bench", "--min-bytes ", o.min_bytes, " is above --max-bytes ", o.max_bytes);
  check(o.max_bytes <= (size_t(1) << 30), "comm bench", "--max-bytes ", o.max_bytes,
        " is above 1 GiB (MPI's int counts bound the anchor)");
  check(o.factor >= 2, "comm bench", "the size factor must be >= 2, got ", o.factor);
  check(o.op != "sendrecv" || g.size() > 1, "comm bench", "sendrecv needs at least 2 ranks");
  std::vector<CommBenchRecord> records;
  for (size_t bytes = std::max<size_t>(o.min_bytes, 1); bytes <= o.max_bytes; bytes *= size_t(o.factor)) {
    // The ceiling first: it borrows the heap and gives it back before the case takes its part.
    // It copies what busbw counts per rank (in a broadcast from rank 0, rank 0 receives nothing).
    const int iters = detail::iterations_for(bytes, o.iters);
    const double factor = bus_factor(o.op, g.size());
    const size_t received = std::max<size_t>(size_t(double(bytes) * factor), 8);
    const double ceiling = interprocess_copy_ceiling(g, received, iters, o.batches, o.op == "broadcast");
    std::unique_ptr<detail::BenchCase> c = detail::make_bench_case(g, o, bytes);
    CommBenchRecord r;
    r.op = o.op;
    r.dtype = std::string(dtype_name(o.dtype));
    r.count = c->count;
    r.bytes = size_t(c->count) * dtype_size(o.dtype);
    r.ranks = g.size();
    r.nodes = g.num_nodes();
    r.ceiling_gbps = ceiling / 1e9;
    r.sol = detail::measure(g, *c, c->run_sol, r.bytes, factor, iters, o.batches);
    r.sol_pct = r.ceiling_gbps > 0 ? 100 * r.sol.busbw / r.ceiling_gbps : 0;
    if (o.anchor_mpi && c->run_mpi) {
      // Open MPI's collective waits inside MPI, where no deadline of Sol's reaches: a stopped
      // peer would hang it for good, so a watchdog ends the run when no call returns in time.
      if (g.rank() == 0) {
        std::fprintf(stderr, "sol comm bench %s: %zu bytes: timing Open MPI's anchor\n", o.op.c_str(), r.bytes);
        std::fflush(stderr);
      }
      detail::MpiProgressDeadline deadline("the MPI anchor of " + o.op, timeout_seconds(), "SOL_COMM_TIMEOUT_S");
      const std::function<void()> run = [&] {
        c->run_mpi();
        deadline.tick();
      };
      r.mpi = detail::measure(g, *c, run, r.bytes, factor, iters, o.batches);
    }
    records.push_back(r);
    c.reset();
    if (o.heap) g.heap_reset();
    if (bytes > o.max_bytes / size_t(o.factor)) break;
  }
  return records;
}

}  // namespace sol::comm
