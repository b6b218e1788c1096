#pragma once
// `sol comm bench`: an nccl-tests style sweep of one collective over message sizes, with the
// results checked on every run and busbw held against the measured inter-process copy ceiling.
//
//   algbw = bytes / time
//   busbw = algbw * 2(n-1)/n (allreduce), (n-1)/n (all_gather, reduce_scatter, all_to_all[_v]),
//           1 (broadcast, sendrecv)
//   ceiling = bytes per second a receiving rank copies from a peer's shared memory into its
//             own, every receiving rank at once, for the bytes busbw counts per rank
//             (bytes * bus factor), timed right before the op (paired; the machines are noisy)
//   SOL% = busbw / ceiling
#include <optional>
#include <string>
#include <vector>

#include "sol/comm.h"
#include "sol/dtype.h"

namespace sol::comm {

inline constexpr const char* kBenchOps[] = {"allreduce",  "reduce_scatter", "all_gather",
                                            "all_to_all", "all_to_all_v",   "broadcast",
                                            "sendrecv"};

struct CommBenchOptions {
  std::string op = "allreduce";
  DType dtype = DType::f32;
  ReduceOp reduce = ReduceOp::sum;
  size_t min_bytes = 8;
  size_t max_bytes = size_t(64) << 20;
  int factor = 2;            // sizes grow by this factor
  int iters = 0;             // timed iterations per batch; 0: chosen from the size
  int batches = 5;           // the median batch is reported
  bool anchor_mpi = false;   // also time Open MPI's own collective on the same buffers
  bool heap = true;          // buffers in the symmetric heap (zero copy) or private memory
  bool in_place = false;     // all_gather only: the input is this rank's block of the output
};

struct CommTiming {
  double time_s = 0;   // median over batches of (max over ranks of the mean iteration time)
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  int64_t wrong = 0;   // elements that differ from the expected result, summed over ranks
};

struct CommBenchRecord {
  std::string op, dtype;
  size_t bytes = 0;
  int64_t count = 0;       // elements in `bytes`
  int ranks = 0, nodes = 0;
  CommTiming sol;
  double ceiling_gbps = 0;  // paired inter-process copy ceiling
  double sol_pct = 0;
  std::optional<CommTiming> mpi;  // the anchor, when asked for
};

double bus_factor(std::string_view op, int ranks);
// Collective over `group`: every rank returns the same records.
std::vector<CommBenchRecord> comm_bench(const Group& group, const CommBenchOptions& options);
// Bytes per second one rank copies `bytes` from the next local rank's shared memory into its
// own while every other copying rank does the same (a single rank copies within its own
// segment). `root_idle`: local rank 0 does not copy (the root of a broadcast).
double interprocess_copy_ceiling(const Group& group, size_t bytes, int iters, int batches,
                                 bool root_idle = false);

// The same ceiling without MPI, for `sol hw`: this process forks ranks - 1 children sharing an
// anonymous mapping, and every rank copies `bytes` from the next rank's region into its own,
// all at once (one thread per rank; median of 5 batches of the slowest rank). GB/s per rank.
struct ShmCopyCeiling {
  int ranks = 0;
  size_t bytes = 0;
  double gbps = 0;
};
std::vector<ShmCopyCeiling> measure_shm_copy_ceilings(const std::vector<int>& rank_counts,
                                                      const std::vector<size_t>& sizes);
// Cached in comm_ceiling.json beside the machine profile (sol::machine_cache_path()), keyed by
// CPU model and core count: 2 ranks (and every core, up to 8) at 64 KiB, 1, 16 and 64 MiB.
std::vector<ShmCopyCeiling> shm_copy_ceilings(bool remeasure);
std::string shm_copy_ceiling_cache_path();

}  // namespace sol::comm
