// sol comm bench OP — under mpirun: an nccl-tests style sweep of one collective, checked on
// every run, with busbw against the measured inter-process copy ceiling (SOL%) and, with
// --anchor mpi, Open MPI's own collective on the same buffers beside it.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli.h"
#include "cp/bench/cp_bench.h"
#include "ep/bench/ep_bench.h"
#include "pp/bench/pp_engram_bench.h"
#include "sol/comm.h"
#include "sol/comm_bench.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/threads.h"

namespace sol::cli {

namespace {

struct CommBenchArgs {
  std::string op, min_bytes = "8", max_bytes = "64M", dtype = "f32", reduce = "sum", anchor;
  int iters = 0, batches = 5, factor = 2;
  bool json = false, private_buffers = false, in_place = false;
};

nlohmann::json timing_json(const comm::CommTiming& t) {
  return {{"time_s", t.time_s}, {"algbw", t.algbw}, {"busbw", t.busbw}, {"wrong", t.wrong}};
}

nlohmann::json comm_record_json(const comm::CommBenchRecord& r) {
  nlohmann::json j = {{"op", r.op},           {"bytes", r.bytes},         {"count", r.count},
                      {"dtype", r.dtype},     {"ranks", r.ranks},         {"nodes", r.nodes},
                      {"time_s", r.sol.time_s}, {"algbw", r.sol.algbw},   {"busbw", r.sol.busbw},
                      {"ceiling_gbps", r.ceiling_gbps}, {"sol_pct", r.sol_pct}, {"wrong", r.sol.wrong}};
  if (r.mpi) j["anchor_mpi"] = timing_json(*r.mpi);
  return j;
}

std::string size_text(size_t bytes) {
  if (bytes >= (size_t(1) << 30) && bytes % (size_t(1) << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (size_t(1) << 20) && bytes % (size_t(1) << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (size_t(1) << 10) && bytes % (size_t(1) << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

std::string comm_table(const std::vector<comm::CommBenchRecord>& records, bool anchor) {
  std::string s = fmt::format("# {:>8} {:>11} {:>5} {:>10} {:>8} {:>8} {:>7} {:>8} {:>6}", "size", "count", "type",
                              "time(us)", "algbw", "busbw", "#wrong", "ceiling", "SOL%");
  if (anchor) s += fmt::format("  | {:>10} {:>8} {:>8} {:>7} {:>6}", "mpi(us)", "algbw", "busbw", "#wrong", "sol/mpi");
  s += "\n";
  for (const auto& r : records) {
    s += fmt::format("  {:>8} {:>11} {:>5} {:>10.2f} {:>8.2f} {:>8.2f} {:>7} {:>8.2f} {:>5.1f}%", size_text(r.bytes),
                     r.count, r.dtype, r.sol.time_s * 1e6, r.sol.algbw, r.sol.busbw, r.sol.wrong, r.ceiling_gbps,
                     r.sol_pct);
    if (r.mpi)
      s += fmt::format("  | {:>10.2f} {:>8.2f} {:>8.2f} {:>7} {:>6.2f}x", r.mpi->time_s * 1e6, r.mpi->algbw,
                       r.mpi->busbw, r.mpi->wrong, r.mpi->time_s / r.sol.time_s);
    else if (anchor)
      s += "  | (no MPI equivalent for this dtype)";
    s += "\n";
  }
  s += "# busbw and ceiling in GB/s; SOL% = busbw / ceiling (inter-process shm copy, paired per size)\n";
  return s;
}

}  // namespace

void add_comm(CLI::App& app, int& exit_code) {
  auto* comm_cmd = app.add_subcommand("comm", "Communication: collectives over shared memory and MPI (run under mpirun)");
  comm_cmd->require_subcommand(1);
  auto a = std::make_shared<CommBenchArgs>();
  std::string ops;
  std::vector<std::string> bench_ops(std::begin(comm::kBenchOps), std::end(comm::kBenchOps));
  bench_ops.insert(bench_ops.end(), std::begin(comm::kPipelineBenchOps), std::end(comm::kPipelineBenchOps));
  bench_ops.insert(bench_ops.end(), std::begin(comm::kEpBenchOps), std::end(comm::kEpBenchOps));
  bench_ops.insert(bench_ops.end(), std::begin(comm::kCpBenchOps), std::end(comm::kCpBenchOps));
  for (const auto& op : bench_ops) ops += (ops.empty() ? "" : "|") + op;
  auto* cmd = comm_cmd->add_subcommand("bench", "nccl-tests style sweep of one collective: time, algbw, busbw, "
                                                "#wrong, SOL% against the inter-process copy ceiling");
  cmd->add_option("op", a->op, ops)->required()->check(CLI::IsMember(bench_ops));
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest message (K/M/G suffixes; default 8)");
  cmd->add_option("--max-bytes", a->max_bytes, "Largest message (default 64M)");
  cmd->add_option("--factor", a->factor, "Size step factor (default 2)")->check(CLI::Range(2, 1024));
  cmd->add_option("--iters", a->iters, "Timed calls per batch (default: from the size)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--batches", a->batches, "Timed batches; the median is reported (default 5)")->check(CLI::Range(1, 1000));
  cmd->add_option("--dtype", a->dtype, "f32 or bf16 for reductions; any dtype for data movement");
  cmd->add_option("--reduce", a->reduce, "sum or max");
  cmd->add_option("--anchor", a->anchor, "mpi: time Open MPI's own collective beside")->check(CLI::IsMember({"mpi"}));
  cmd->add_flag("--private", a->private_buffers, "Private buffers (staged copies) instead of the symmetric heap");
  cmd->add_flag("--in-place", a->in_place, "all_gather: the input is this rank's block of the output");
  cmd->add_flag("--json", a->json, "Print a JSON array of records");
  cmd->callback([a, &exit_code] {
    comm::CommBenchOptions o;
    o.op = a->op;
    o.dtype = parse_dtype(a->dtype, "comm bench: --dtype");
    o.reduce = comm::parse_reduce_op(a->reduce);
    o.min_bytes = size_t(parse_size(a->min_bytes, "comm bench: --min-bytes"));
    o.max_bytes = size_t(parse_size(a->max_bytes, "comm bench: --max-bytes"));
    o.factor = a->factor;
    o.iters = a->iters;
    o.batches = a->batches;
    o.anchor_mpi = a->anchor == "mpi";
    o.heap = !a->private_buffers;
    o.in_place = a->in_place;
    const comm::Group& world = comm::Group::world();
    // The ranks of a node share its cores: one rank's copies must not take its neighbours'.
    if (!std::getenv("SOL_NUM_THREADS"))
      set_num_threads(std::max(1, hardware_threads() / world.local().size()));
    // Progress before the sweep, which can run for minutes (rank 0 is past the collective start-up).
    if (world.rank() == 0) {
      fmt::print(stderr, "sol comm bench {}: {} ranks on {} node(s) started; measuring\n", o.op, world.size(),
                 world.num_nodes());
      std::fflush(stderr);
    }
    if (comm::is_cp_bench_op(o.op)) {  // its own table: time against the attention floor
      exit_code = comm::cp_bench(world, o, a->json) > 0 ? kCheckFailed : kOk;
      return;
    }
    std::vector<comm::CommBenchRecord> records =
        comm::is_pipeline_bench_op(o.op) ? comm::pipeline_bench(world, o)
        : comm::is_ep_bench_op(o.op)     ? comm::ep_bench(world, o)
                                         : comm::comm_bench(world, o);
    int64_t wrong = 0;
    for (const auto& r : records) wrong += r.sol.wrong + (r.mpi ? r.mpi->wrong : 0);
    if (world.rank() == 0) {
      if (a->json) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : records) arr.push_back(comm_record_json(r));
        fmt::print("{}\n", arr.dump(2));
      } else {
        fmt::print("# sol comm bench {}: {} ranks on {} node(s), {} buffers{}, reduce {}\n", o.op, world.size(),
                   world.num_nodes(), o.heap ? "symmetric-heap" : "private", o.in_place ? ", in place" : "",
                   a->reduce);
        fmt::print("{}", comm_table(records, o.anchor_mpi));
      }
      if (wrong > 0) fmt::print(stderr, "sol comm bench: {} wrong elements\n", wrong);
    }
    exit_code = wrong > 0 ? kCheckFailed : kOk;
  });
}

}  // namespace sol::cli
