#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <mutex>

#include "device/gpu_ceilings.h"
#include "sol/bench.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/threads.h"

namespace sol {

namespace {
// Restores the process-wide thread count when a benchmark ends, even by exception.
struct ThreadScope {
  explicit ThreadScope(int n) { set_num_threads(n); }
  ~ThreadScope() { set_num_threads(0); }
};

// A ceiling re-measured beside the op: unit, raw units/s (0: not measured or unavailable).
struct PairedCeiling {
  Unit unit;
  double value = 0;
};

// The floor with each re-measured ceiling in place of the cached one.
Floor floor_with(const Cost& c, const MachineProfile& m, int threads, const std::vector<PairedCeiling>& paired) {
  FloorCeilings k = floor_ceilings(c, m, threads);
  for (const PairedCeiling& p : paired) {
    if (p.value <= 0) continue;
    if (p.unit == c.compute && c.flops > 0) k.peak = p.value;
    if (p.unit == c.memory && c.bytes > 0) k.bandwidth = p.value;
    if (p.unit == Unit::mem_read && k.read_bandwidth > 0) k.read_bandwidth = p.value;
    if (p.unit == Unit::mem_write && k.write_bandwidth > 0) k.write_bandwidth = p.value;
  }
  return roofline_floor(c, k.peak, k.bandwidth, k.read_bandwidth, k.write_bandwidth);
}

double measure_now(Unit u, int threads) {
  Ceiling c = measure_ceiling(u, threads, 0.1);
  if (!c.available) return 0;
  return threads == 1 && c.one_thread > 0 ? c.one_thread : c.all_threads;
}

// Whether the op counts FLOPs at all (GEMM, attention) or only moves bytes: the first of its
// small check cases that costs any FLOPs says so. Cached per op.
bool counts_flops(const OpInfo& op) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(op.name);
  if (it != known.end()) return it->second;
  bool flops = false;
  for (const auto& given : op.check_table) {
    try {
      flops = op.make(resolve_params(op, given), 0)->cost().flops > 0;
    } catch (const Error&) {
      continue;  // a check case made to be rejected
    }
    if (flops) break;
  }
  return known[op.name] = flops;
}

// An op with no work (no rows, or no FLOPs where it counts them: gemm --m 0) has no SOL%: any
// time is "above" a floor that its cost formula still charges for reading an operand it
// never needs.
bool has_no_work(const OpInfo& op, const OpParams& params, const Cost& c) {
  if (c.flops > 0) return false;
  if (c.bytes <= 0) return true;
  if (!op.rows_param.empty() && params.has(op.rows_param) && params.integer(op.rows_param) == 0) return true;
  return counts_flops(op);
}

// The record's anchor, once its floor is known: held to the op's floor (no SOL% where the op has
// none).
void record_anchor(BenchRecord& r, const std::string& name, const Timing& t) {
  r.anchor = BenchRecord::Anchor{name, t, std::isnan(r.sol_pct) ? std::nan("") : sol_percent(r.floor, t.median_s)};
}

// The op again at in_cache_rows rows, one input set, warmed into cache by the harness's warm-up
// runs, timed as the case was and held to the same ceilings (see BenchRecord::in_cache_*).
void time_in_cache(const OpInfo& op, const OpParams& params, const MachineProfile& machine, int threads,
                   const std::vector<PairedCeiling>& paired, TimingOptions timing, BenchRecord& r) {
  if (op.rows_param.empty() || !params.has(op.rows_param)) return;
  const int64_t rows = params.integer(op.rows_param);
  if (rows == 0 || r.cost.bytes <= 0) return;
  OpParams small = params;
  const long l2 = std::max(cpu_features().l2_bytes, 256L << 10);  // unknown L2: assume a small one
  small.set(op.rows_param, std::to_string(in_cache_rows(rows, r.cost.bytes, threads, l2)));
  std::unique_ptr<OpCase> c = op.make(small, 0);
  const Cost cost = c->cost();
  // Bytes that do not shrink with the rows (padding to an alignment, a fixed table) can leave
  // the small case larger than the caches: its time would not be an in-cache time.
  if (cost.bytes > double(threads) * double(l2)) return;
  timing.input_sets = 1;
  const Timing t = time_runs([&](int) { c->run(0); }, timing);
  r.in_cache_shape = c->shape();
  r.in_cache_s = t.median_s;
  r.in_cache_sol_pct = sol_percent(floor_with(cost, machine, threads, paired), t.median_s);
}

// ---- cases on a GPU: CUDA events on the device's current stream, the device's ceilings ----

// The device ceilings a cost's floor needs: its compute unit when it has FLOPs, its memory
// level, and for a split cost the read and write terms.
std::vector<Unit> device_units(const Cost& c) {
  std::vector<Unit> units;
  auto add = [&](Unit u) {
    if (std::find(units.begin(), units.end(), u) == units.end()) units.push_back(u);
  };
  if (c.flops > 0) add(c.compute);
  if (c.bytes > 0) add(c.memory);
  if (c.split()) {
    add(Unit::mem_read);
    if (c.written_bytes() > 0) add(Unit::mem_write);
  }
  return units;
}

double measure_on_device(const OpInfo& op, Unit u, Device d) {
  const std::string_view name = gpu_ceiling_for(u);
  check(!name.empty(), op.name, "its cost needs the ", unit_name(u), " ceiling, which Sol does not measure on a GPU");
  return measure_gpu_ceiling(name, d, 0.05);
}

// As bench_prepared on the CPU, for a case whose operands are on cuda:N: the ceilings its floor
// needs are measured on the device before and after the timed runs (the better of the two
// kept), and the op is timed by time_device_runs. No in-cache figure yet.
BenchRecord bench_on_device(const OpInfo& op, PreparedCase& p, const BenchOptions& opt) {
  OpCase* c = p.c.get();
  const Device d = c->device();
  BenchRecord r;
  r.op = op.name;
  r.shape = c->shape();
  r.dtype = c->dtype();
  r.isa = "cuda:" + std::to_string(d.index) + " " + cuda_device(d.index).arch();  // the "isa" column
  r.threads = 1;
  r.cold = p.cold;
  r.input_sets = c->input_sets();
  r.cost = c->cost();
  check(opt.timing.clock == TimingOptions::Clock::wall, "bench",
        "--cpu-time times a host thread; a case on ", d, " is timed with CUDA events");
  if (opt.run_check) r.check = c->check();
  // The cached profile (`sol hw`), when there is one, gives the cached SOL%; --no-pair uses it
  // alone (measuring it first if needed).
  std::optional<GpuProfile> cached = load_cached_gpu(d);
  if (!opt.pair_ceiling && !cached) cached = load_or_measure_gpu(d, false);
  auto cached_value = [&](Unit u) { return cached ? cached->value(gpu_ceiling_for(u)) : 0.0; };
  std::vector<PairedCeiling> paired;
  for (Unit u : device_units(r.cost))
    paired.push_back({u, opt.pair_ceiling ? measure_on_device(op, u, d) : cached_value(u)});
  TimingOptions topt = opt.timing;
  topt.input_sets = c->input_sets();
  r.timing = time_device_runs(d, [&](int set) { c->run(set); }, topt);
  const std::string anchor = c->anchor();
  Timing anchor_timing;
  if (!anchor.empty()) anchor_timing = time_device_runs(d, [&](int set) { c->run_anchor(set); }, topt);
  for (PairedCeiling& pc : paired) {
    if (!opt.pair_ceiling) break;
    const double after = measure_on_device(op, pc.unit, d);
    r.ceiling_moved = std::max(r.ceiling_moved, ceiling_move(pc.value, after));
    pc.value = std::max(pc.value, after);
  }
  auto floor_of = [&](const std::function<double(Unit)>& value) {
    FloorCeilings k;
    if (r.cost.flops > 0) k.peak = value(r.cost.compute);
    k.bandwidth = value(r.cost.memory);
    if (r.cost.split()) {
      k.read_bandwidth = value(Unit::mem_read);
      k.write_bandwidth = value(Unit::mem_write);
    }
    return roofline_floor(r.cost, k.peak, k.bandwidth, k.read_bandwidth, k.write_bandwidth);
  };
  auto paired_value = [&](Unit u) {
    for (const PairedCeiling& pc : paired)
      if (pc.unit == u) return pc.value;
    return 0.0;
  };
  r.floor = floor_of(paired_value);
  r.ceiling_unit = r.floor.bound == Bound::compute ? r.cost.compute : r.floor.memory_unit;
  if (opt.pair_ceiling) r.ceiling_paired = paired_value(r.ceiling_unit);
  r.ceiling_cached = cached_value(r.ceiling_unit);
  const double t = r.timing.median_s;
  r.sol_pct = sol_percent(r.floor, t);
  r.sol_pct_cached = cached ? sol_percent(floor_of(cached_value), t) : r.sol_pct;
  r.tflops = t > 0 ? r.cost.flops / t / 1e12 : 0;
  r.gbps = t > 0 ? r.cost.bytes / t / 1e9 : 0;
  if (has_no_work(op, p.params, r.cost)) r.sol_pct = r.sol_pct_cached = std::nan("");
  if (!anchor.empty()) record_anchor(r, anchor, anchor_timing);
  return r;
}

}  // namespace

// The units to re-measure beside an op: the one that bounds it by the cache, and for a cost
// that splits its bytes (decision 12) every memory term of its floor. All from the same
// minutes: this guest's two-thread memory rates flip between two states (~60 and ~120 GB/s
// of copy) within minutes, and a floor mixing a paired copy term with a cached read term from
// the other state printed 105-135% SOL.
std::vector<Unit> units_to_pair(const Cost& c, Unit bound_unit) {
  std::vector<Unit> units{bound_unit};
  auto add = [&](Unit u) {
    if (std::find(units.begin(), units.end(), u) == units.end()) units.push_back(u);
  };
  if (c.split()) {
    add(c.memory);
    add(Unit::mem_read);
    if (c.written_bytes() > 0) add(Unit::mem_write);
  }
  return units;
}

double anchor_speedup(const BenchRecord& r) {
  if (!r.anchor || !(r.timing.median_s > 0) || !(r.anchor->timing.median_s > 0)) return std::nan("");
  return r.anchor->timing.median_s / r.timing.median_s;
}

double ceiling_move(double before, double after) {
  if (before <= 0 || after <= 0) return 1;  // a unit not measured here moved nowhere
  return std::max(before, after) / std::min(before, after);
}

int64_t in_cache_rows(int64_t rows, double bytes, int threads, long l2_bytes) {
  check(rows >= 0 && bytes >= 0 && threads >= 1 && l2_bytes > 0, "in_cache_rows", "rows = ", rows, ", bytes = ",
        bytes, ", threads = ", threads, ", l2_bytes = ", l2_bytes, ": none may be negative, threads and L2 >= 1");
  const double budget = double(threads) * double(l2_bytes) / 2;
  if (bytes <= budget) return rows;
  const auto cut = int64_t(double(rows) * budget / bytes);
  return std::clamp<int64_t>(cut, std::min<int64_t>(threads, rows), rows);
}

// Rotated input sets of a device case cover four times the device's L2 (every set of a run
// is evicted by the sets after it, so each run reads from HBM as the floor assumes).
int64_t device_cold_bytes(int64_t l2_bytes) { return 4 * std::max<int64_t>(l2_bytes, 16 << 20); }

PreparedCase prepare_case(const OpInfo& op, const OpParams& params, bool cold, int64_t cold_bytes) {
  check(cold_bytes >= 0, op.name, "cold_bytes = ", cold_bytes, ": must be >= 0 (0: the default)");
  // Cold sets must outgrow the LLC several times over: with only twice its size, a good part of
  // the previous run's data is still cached and a memory-bound op beats the DRAM ceiling.
  if (cold_bytes == 0) cold_bytes = 8 * std::max<int64_t>(cpu_features().l3_bytes, 16L << 20);
  PreparedCase p{op.make(params, cold ? cold_bytes : 0), cold, params};
  if (const Device d = p.c->device(); !d.is_cpu()) {
    // On a GPU every case rotates sets past L2 unless one set already outgrows it four times.
    const int64_t device_cold = device_cold_bytes(cuda_device(d.index).l2_bytes);
    if (cold || p.c->cost().bytes < double(device_cold)) {
      p.c.reset();  // its device memory is freed before the sets are made
      p.c = op.make(params, device_cold);
      p.cold = true;
    }
    return p;
  }
  // The memory floor is taken at DRAM bandwidth, so a case whose bytes would largely stay in
  // the LLC between runs is measured cold: its inputs rotate through sets that exceed it.
  const Cost c = p.c->cost();
  if (!cold && unit_is_memory(c.memory) && c.memory != Unit::l2_read && c.bytes < double(cold_bytes)) {
    p.c = op.make(params, cold_bytes);
    p.cold = true;
  }
  return p;
}

BenchRecord bench_prepared(const OpInfo& op, PreparedCase& p, const MachineProfile& machine, const BenchOptions& opt) {
  if (!p.c->device().is_cpu()) return bench_on_device(op, p, opt);
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  check(threads <= 4096, "bench", "--threads = ", threads, " is not plausible");
  ThreadScope scope(threads);
  OpCase* c = p.c.get();

  BenchRecord r;
  r.op = op.name;
  r.shape = c->shape();
  r.dtype = c->dtype();
  r.isa = std::string(isa_name(active_isa()));
  r.threads = threads;
  r.cold = p.cold;
  r.input_sets = c->input_sets();
  r.cost = c->cost();
  // The unit that really bounds the flops here, so the record, the paired re-measurement and
  // the floor all name the same one (bf16 on fp32 FMAs where the CPU lacks AVX512_BF16).
  r.cost.compute = compute_unit_on(r.cost.compute, machine);
  if (opt.run_check) r.check = c->check();

  // Which ceiling bounds this op is decided with the cached profile, then re-measured.
  const Floor cached = roofline_floor(r.cost, machine, threads);
  const Unit cached_bound = cached.bound == Bound::compute ? r.cost.compute : cached.memory_unit;

  TimingOptions topt = opt.timing;
  topt.input_sets = c->input_sets();
  // CPU time of the calling thread counts only that thread's work, so it needs one thread; the
  // floor then comes from the cached ceilings (a ceiling re-measured on a loaded machine is
  // wall-clock and low, and would inflate SOL%).
  r.cpu_time = topt.clock == TimingOptions::Clock::thread_cpu;
  check(!r.cpu_time || threads == 1, "bench", "--cpu-time times the calling thread only: it needs --threads 1, not ",
        threads);
  const bool pair = opt.pair_ceiling && !r.cpu_time;
  std::vector<PairedCeiling> paired;
  if (pair)
    for (Unit u : units_to_pair(r.cost, cached_bound)) paired.push_back({u, measure_now(u, threads)});
  r.timing = time_runs([&](int set) { c->run(set); }, topt);
  const std::string anchor = c->anchor();
  Timing anchor_timing;
  if (!anchor.empty()) anchor_timing = time_runs([&](int set) { c->run_anchor(set); }, topt);
  // A ceiling is a maximum: the better of the two pairings is the closer estimate of it.
  for (PairedCeiling& pc : paired) {
    const double after = measure_now(pc.unit, threads);
    r.ceiling_moved = std::max(r.ceiling_moved, ceiling_move(pc.value, after));
    pc.value = std::max(pc.value, after);
  }

  r.floor = floor_with(r.cost, machine, threads, paired);
  // The unit that bounds the floor taken with the paired ceilings (it may differ from the
  // cache's choice), and its paired rate.
  r.ceiling_unit = r.floor.bound == Bound::compute ? r.cost.compute : r.floor.memory_unit;
  r.ceiling_cached = machine.value(r.ceiling_unit, threads);
  r.ceiling_paired = 0;
  for (const PairedCeiling& pc : paired)
    if (pc.unit == r.ceiling_unit) r.ceiling_paired = pc.value;
  const double t = r.timing.median_s;
  r.sol_pct = sol_percent(r.floor, t);
  r.sol_pct_cached = sol_percent(cached, t);
  r.tflops = t > 0 ? r.cost.flops / t / 1e12 : 0;
  r.gbps = t > 0 ? r.cost.bytes / t / 1e9 : 0;
  const bool no_work = has_no_work(op, p.params, r.cost);
  if (no_work) r.sol_pct = r.sol_pct_cached = std::nan("");  // printed "-", null in JSON
  if (!anchor.empty()) record_anchor(r, anchor, anchor_timing);
  if (no_work) return r;
  if (opt.in_cache && r.floor.bound == Bound::memory) time_in_cache(op, p.params, machine, threads, paired, topt, r);
  return r;
}

BenchRecord bench_case(const OpInfo& op, const OpParams& params, const MachineProfile& machine,
                       const BenchOptions& opt) {
  PreparedCase p = prepare_case(op, params, opt.cold);
  return bench_prepared(op, p, machine, opt);
}

}  // namespace sol
