#pragma once
// Benchmarking one registered op at one shape: time it with the harness, re-measure the
// ceilings of its floor right next to the timed runs (the machines are noisy; a ceiling from
// twenty minutes ago can be 20% off), and compute SOL% against that pairing.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sol/hw.h"
#include "sol/registry.h"
#include "sol/roofline.h"
#include "sol/timing.h"

namespace sol {

struct BenchOptions {
  int threads = 0;           // 0: sol::num_threads()
  bool cold = false;         // rotate input sets larger than the LLC (automatic for cases
                             // whose bytes fit in it: floors are taken at DRAM bandwidth)
  bool pair_ceiling = true;  // re-measure the bounding unit's ceiling beside the op
  bool run_check = false;    // also run the op's correctness check first
  bool in_cache = true;      // also time the op shrunk to fit in L2 (BenchRecord::in_cache_*)
  TimingOptions timing;
};

struct BenchRecord {
  std::string op, shape, dtype, isa;
  int threads = 1;
  bool cold = false;    // inputs rotated through sets larger than the LLC
  bool cpu_time = false;  // timing is the calling thread's CPU time (one thread), not wall
  int input_sets = 1;   // how many sets the case rotated through
  Timing timing;
  Cost cost;
  Floor floor;          // against the paired ceiling (or the cached one when not paired)
  double tflops = 0;    // achieved
  double gbps = 0;      // achieved
  double sol_pct = 0;
  Unit ceiling_unit = Unit::mem_copy;  // the bounding unit
  double ceiling_paired = 0;           // raw units/s, 0 when not paired
  double ceiling_cached = 0;
  double sol_pct_cached = 0;           // the same time against the cached ceiling
  // The largest ratio between a paired ceiling's two measurements, before and after the timed
  // runs (1: none moved, or nothing paired). This guest's two-thread memory flips between two
  // states ~2x apart within minutes; above kCeilingMovedLimit the op may have been timed in the
  // other state than the ceiling kept, and its SOL% is marked as uncertain.
  double ceiling_moved = 1;
  std::optional<CheckResult> check;
  // The same op at fewer rows (OpInfo::rows_param), its data kept in cache (one input set, not
  // rotated), timed with the same clock and held to the same ceilings: the SOL% the op's code
  // reaches when DRAM is not what it waits for. Well above sol_pct: memory holds the op back.
  // Near sol_pct or below the target: its instructions do, and no memory pattern lifts it (the
  // split that docs/ARCHITECTURE.md decision 14 explains). in_cache_s = 0: not measured (the
  // floor is compute-bound, the op has no rows parameter, its bytes do not shrink with its rows
  // enough to fit in L2, or BenchOptions::in_cache is off).
  std::string in_cache_shape;
  double in_cache_s = 0;
  double in_cache_sol_pct = 0;
  // The case's anchor (OpCase::anchor), timed right after the op on the same operands with the
  // same clock, between the same ceiling measurements, and held to the same floor; absent when
  // the case has none.
  struct Anchor {
    std::string name;    // "cuBLASLt 13.1.0 fp8 block 1x128/128x128"
    Timing timing;
    double sol_pct = 0;  // the anchor's time against the op's floor
  };
  std::optional<Anchor> anchor;
};

// The anchor's median over Sol's: Sol's speed relative to its anchor (> 1: Sol is faster).
// NaN without an anchor or a time.
double anchor_speedup(const BenchRecord& r);

BenchRecord bench_case(const OpInfo& op, const OpParams& params, const MachineProfile& machine,
                       const BenchOptions& opt);

// The same in two steps, so one case (its buffers filled once) can be benchmarked at several
// thread counts. prepare_case decides cold mode: requested, or automatic when the case's bytes
// would mostly stay in the LLC (floors are taken at DRAM bandwidth). The cold sets cover
// `cold_bytes` together; 0 (the default): 8x the LLC. Fewer bytes fill faster but leave part of
// a memory-bound case's reads to the LLC (`sol report --cold-bytes`, for smoke tests).
struct PreparedCase {
  std::unique_ptr<OpCase> c;
  bool cold = false;
  OpParams params;  // what the case was made from (the in-cache run shrinks its rows)
};
// The ceilings `sol bench` re-measures beside an op (unless --cpu-time): the one that bounds it
// by the cached profile, and for a cost that splits its bytes (Cost::split) every memory term
// of its floor (docs/ARCHITECTURE.md decisions 12-13), so that all of them come from the same
// minutes. bound_unit first, no unit twice.
std::vector<Unit> units_to_pair(const Cost& cost, Unit bound_unit);

PreparedCase prepare_case(const OpInfo& op, const OpParams& params, bool cold, int64_t cold_bytes = 0);

// The bytes a case on a GPU with `l2_bytes` of L2 must move per run to read from HBM: four times
// the L2 (at least 64 MiB). prepare_case rotates input sets covering this much together for any
// device case that moves fewer bytes (the record says cold); a case at or above it runs its one
// set, which the runs after it evict anyway (the record says not cold, one input set).
int64_t device_cold_bytes(int64_t l2_bytes);

// How far a paired ceiling moved between its measurements before and after an op (>= 1), and
// the ratio above which a record's SOL% is marked uncertain (`~` in tables, "ceiling_moved" in
// JSON): twice the spread of one state's repeated measurements (~10%), well under the two
// states' 2x.
double ceiling_move(double before, double after);
inline constexpr double kCeilingMovedLimit = 1.2;

// The rows of the in-cache run for a case of `rows` rows moving `bytes`: cut so that its bytes
// are at most half of L2 per thread (l2_bytes per core), at least one row per thread, never
// more than `rows` (a case already that small keeps its rows, and runs hot instead of cold).
int64_t in_cache_rows(int64_t rows, double bytes, int threads, long l2_bytes);
BenchRecord bench_prepared(const OpInfo& op, PreparedCase& p, const MachineProfile& machine,
                           const BenchOptions& opt);

// The anchor's columns of `sol bench`'s table (fixed width, after SOL%): its median, its SOL%
// and Sol/anc (anchor_speedup), dashes for a record without one; and the legend under the table
// that names each dtype's anchor ("" when no record has one).
std::string anchor_table_header();
std::string anchor_table_cells(const BenchRecord& r);
std::string anchor_table_legend(const std::vector<BenchRecord>& records);

// The record as one JSON object: the form `sol bench --json` prints and the Python API returns.
std::string bench_record_json(const BenchRecord& r);

}  // namespace sol
