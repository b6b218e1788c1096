// sol_gemm_anchors: Sol's GEMM beside oneDNN and OpenBLAS on the shapes of bench/gemm_shapes.json,
// in one process, interleaved, each timed with Sol's harness (median after warm-up) and held to
// the same floor (sol::roofline_floor with this machine's measured ceilings, the bounding unit
// re-measured beside the runs as sol bench does). Usage: bench/README.md.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runners.h"
#include "shape_table.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/roofline.h"
#include "sol/threads.h"
#include "sol/timing.h"

#ifndef SOL_GEMM_SHAPES_PATH
#define SOL_GEMM_SHAPES_PATH "bench/gemm_shapes.json"
#endif

namespace sol_bench {

namespace {

struct Options {
  std::string shapes = SOL_GEMM_SHAPES_PATH;
  std::string filter;
  std::string max_flops;
  std::string dtypes = "f32,bf16";  // s8 too, where Sol supports it
  std::string bf16_out = "bf16";
  std::string threads = "1,all";
  std::string impls = "sol,onednn,openblas";
  std::string openblas_core = "auto";
  int rounds = 1;
  int min_runs = 5;
  double min_seconds = 0.3;
  bool no_pair = false;
  bool cpu_time = false;
  bool warm = false;
  bool list = false;
  bool json = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; std::getline(ss, w, ',');)
    if (!w.empty()) out.push_back(w);
  return out;
}

double parse_flops(const std::string& s) {
  if (s.empty()) return 0;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    sol::fail("gemm_anchors", "--max-flops = '", s, "' is not a number");
  }
  const std::string suffix = s.substr(used);
  if (suffix == "G") v *= 1e9;
  else if (suffix == "T") v *= 1e12;
  else sol::check(suffix.empty(), "gemm_anchors", "--max-flops = '", s, "': suffix must be G or T");
  return v;
}

std::vector<int> parse_threads(const std::string& s) {
  std::vector<int> out;
  for (const std::string& w : split(s)) {
    int t = 0;
    if (w == "all") t = sol::hardware_threads();
    else {
      try {
        t = std::stoi(w);
      } catch (const std::exception&) {
      }
    }
    sol::check(t >= 1 && t <= 4096, "gemm_anchors", "--threads: '", w, "' is not a thread count");
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

// The unit that does a GEMM's multiplies at its fastest on this machine: the matrix unit when
// there is one (AMX), else the vector FMA / dot-product unit. Int8's dot-product unit is looked
// up by name: a profile (or a build of Sol) without it cannot give s8 a floor.
sol::Unit compute_unit(sol::DType in, const sol::MachineProfile& m) {
  auto available = [&](sol::Unit u) {
    for (const sol::Ceiling& c : m.ceilings)
      if (c.unit == u) return c.available;
    return false;
  };
  if (in == sol::DType::bf16)  // the faster of dot_bf16 and fma_f32 (sol/roofline.h)
    return available(sol::Unit::amx_bf16) ? sol::Unit::amx_bf16 : sol::compute_unit_on(sol::Unit::dot_bf16, m);
  if (in == sol::DType::i8) {
    if (available(sol::Unit::amx_int8)) return sol::Unit::amx_int8;
    const sol::Unit dot = sol::parse_unit("dot_s8");  // throws when this build has no such unit
    sol::check(available(dot), "gemm_anchors", "s8 needs the dot_s8 ceiling, which this machine profile lacks");
    return dot;
  }
  return sol::Unit::fma_f32;
}

double measure_now(sol::Unit u, int threads) {
  sol::Ceiling c = sol::measure_ceiling(u, threads, 0.1);
  if (!c.available) return 0;
  return threads == 1 && c.one_thread > 0 ? c.one_thread : c.all_threads;
}

// Anchors agree with Sol to within the rounding of two different summation orders: f32 drifts
// like a random walk (~eps * sqrt(K)); a bf16 output is rounded to 8 bits.
double tolerance(const GemmCase& c) {
  if (c.in == sol::DType::i8) return 0;  // int32 sums are exact
  if (c.in == sol::DType::bf16 || c.out == sol::DType::bf16) return 1e-2;
  return 2e-5 * std::max(1.0, std::sqrt(double(c.shape.k) / 4096.0));
}

struct ImplResult {
  std::string name;
  std::unique_ptr<GemmRunner> runner;
  std::string why_not;
  sol::Timing timing;
  double rel_err = -1;  // vs Sol; -1 for Sol itself
  bool ok = true;
};

std::string dtype_label(const GemmCase& c) {
  return std::string(sol::dtype_name(c.in)) + "->" + std::string(sol::dtype_name(c.out));
}

class Report {
 public:
  Report(FILE* out, bool json) : out_(out), json_(json) {}

  void header(const sol::MachineProfile& m) {
    std::fprintf(out_, "machine: %s, %d cores; cached ceilings 1t / %dt: fma_f32 %.0f / %.0f GFLOP/s, "
                       "dot_bf16 %.0f / %.0f GFLOP/s, mem_read %.1f / %.1f GB/s\n",
                 m.cpu_model.c_str(), m.cores, m.cores, m.get(sol::Unit::fma_f32).one_thread / 1e9,
                 m.get(sol::Unit::fma_f32).all_threads / 1e9, m.get(sol::Unit::dot_bf16).one_thread / 1e9,
                 m.get(sol::Unit::dot_bf16).all_threads / 1e9, m.get(sol::Unit::mem_read).one_thread / 1e9,
                 m.get(sol::Unit::mem_read).all_threads / 1e9);
    std::fprintf(out_, "sol: isa %s; %s; %s\n", std::string(sol::isa_name(sol::active_isa())).c_str(),
                 onednn_description().c_str(), openblas_description().c_str());
    std::fprintf(out_, "times: median per run (ms); SOL%% = floor / median against the paired ceiling of the "
                       "bounding unit; err = ||anchor - Sol|| / ||Sol||; x = best anchor time / Sol time\n\n");
    std::fprintf(out_, "%-24s %-11s %3s %-9s %5s | %9s %7s %6s | %9s %6s %8s | %9s %6s %8s | %6s\n", "shape",
                 "dtype", "thr", "bound", "sets", "Sol ms", "TFLOP/s", "SOL%", "oneDNN ms", "SOL%", "err",
                 "OpenBLAS", "SOL%", "err", "x");
    std::fflush(out_);
  }

  void row(const GemmCase& c, int threads, const sol::Cost& cost, const sol::Floor& floor, const sol::Floor& cached,
           sol::Unit unit, double paired, double cached_ceiling, const std::vector<ImplResult>& impls) {
    const ImplResult* sol_r = nullptr;
    double best_anchor = 0;
    for (const ImplResult& r : impls) {
      if (!r.runner) continue;
      if (r.name == "sol") sol_r = &r;
      else if (best_anchor == 0 || r.timing.median_s < best_anchor) best_anchor = r.timing.median_s;
    }
    auto impl = [&](const char* name) -> const ImplResult* {
      for (const ImplResult& r : impls)
        if (r.name == name && r.runner) return &r;
      return nullptr;
    };
    auto pct = [&](const ImplResult* r) { return sol::sol_percent(floor, r->timing.median_s); };
    std::fprintf(out_, "%-24s %-11s %3d %-9s %5d |", c.shape.name.c_str(), dtype_label(c).c_str(), threads,
                 std::string(sol::unit_name(unit)).c_str(), c.sets);
    if (sol_r)
      std::fprintf(out_, " %9.3f %7.3f %6.1f |", sol_r->timing.median_s * 1e3,
                   cost.flops / sol_r->timing.median_s / 1e12, pct(sol_r));
    else
      std::fprintf(out_, " %9s %7s %6s |", "-", "-", "-");
    for (const char* name : {"onednn", "openblas"}) {
      const ImplResult* r = impl(name);
      if (!r) {
        std::fprintf(out_, " %9s %6s %8s |", "n/a", "", "");
        continue;
      }
      char err[32] = "-";
      if (r->rel_err >= 0 || std::isnan(r->rel_err))
        std::snprintf(err, sizeof err, r->ok ? "%.1e" : "FAIL", r->rel_err);
      std::fprintf(out_, " %9.3f %6.1f %8s |", r->timing.median_s * 1e3, pct(r), err);
    }
    if (sol_r && best_anchor > 0) std::fprintf(out_, " %5.2fx\n", best_anchor / sol_r->timing.median_s);
    else std::fprintf(out_, " %6s\n", "-");
    std::fflush(out_);

    for (const ImplResult& r : impls) {
      if (!r.runner) continue;
      const double t = r.timing.median_s;
      nlohmann::json j = {
          {"op", "gemm"}, {"impl", r.name}, {"shape", c.shape.name}, {"dims", c.shape.describe()},
          {"dtype", dtype_label(c)}, {"threads", threads}, {"time_s", t}, {"min_s", r.timing.min_s},
          {"max_s", r.timing.max_s}, {"runs", r.timing.runs}, {"flops", cost.flops}, {"bytes", cost.bytes},
          {"tflops", cost.flops / t / 1e12}, {"gbps", cost.bytes / t / 1e9},
          {"bound", std::string(sol::bound_name(floor.bound))}, {"floor_s", floor.floor_s},
          {"sol_pct", sol::sol_percent(floor, t)}, {"sol_pct_cached", sol::sol_percent(cached, t)},
          {"ceiling_unit", std::string(sol::unit_name(unit))}, {"ceiling_paired", paired},
          {"ceiling_cached", cached_ceiling}, {"cold", c.sets > 1}, {"input_sets", c.sets},
          {"detail", r.runner->detail()}};
      if (r.name == "sol") {
        if (best_anchor > 0) j["speedup_vs_best_anchor"] = best_anchor / t;
      } else {
        j["rel_err_vs_sol"] = r.rel_err;
        j["check"] = r.ok ? "ok" : "FAIL";
      }
      records_.push_back(std::move(j));
    }
  }

  void note(const std::string& s) {
    std::fprintf(out_, "  %s\n", s.c_str());
    std::fflush(out_);
  }

  void finish() const {
    if (json_) std::printf("%s\n", records_.dump(1).c_str());
  }

 private:
  FILE* out_;
  bool json_;
  nlohmann::json records_ = nlohmann::json::array();
};

void set_all_threads(int threads) {
  sol::set_num_threads(threads);
  set_onednn_threads(threads);
  set_openblas_threads(threads);
}

// Returns false when an anchor disagreed with Sol.
bool run_case(const GemmCase& c, int threads, const Options& opt, const std::vector<std::string>& impl_names,
              const sol::MachineProfile& machine, Report& report) {
  sol::Cost cost;
  cost.flops = c.shape.flops();
  cost.bytes = c.bytes();
  cost.memory = sol::Unit::mem_read;
  try {
    cost.compute = compute_unit(c.in, machine);
  } catch (const sol::Error& e) {
    report.note(c.shape.name + " " + dtype_label(c) + ": skipped: " + e.what());
    return true;
  }

  set_all_threads(threads);
  std::vector<ImplResult> impls;
  for (const std::string& name : impl_names) {
    ImplResult r;
    r.name = name;
    if (name == "sol") r.runner = make_sol_runner(c, &r.why_not);
    else if (name == "onednn") r.runner = make_onednn_runner(c, &r.why_not);
    else if (name == "openblas") r.runner = make_openblas_runner(c, &r.why_not);
    impls.push_back(std::move(r));
  }

  // Correctness: every anchor's set-0 output against Sol's.
  const ImplResult* sol_r = nullptr;
  for (ImplResult& r : impls)
    if (r.runner) {
      r.runner->run(0);
      if (r.name == "sol") sol_r = &r;
    }
  bool all_ok = true;
  if (sol_r)
    for (ImplResult& r : impls)
      if (r.runner && &r != sol_r) {
        r.rel_err = relative_error(*r.runner, *sol_r->runner, c);
        r.ok = r.rel_err <= tolerance(c);  // NaN fails too
        all_ok = all_ok && r.ok;
      }

  const sol::Floor cached = sol::roofline_floor(cost, machine, threads);
  const sol::Unit unit = cached.bound == sol::Bound::compute ? cost.compute : cost.memory;
  const double cached_ceiling = machine.value(unit, threads);

  sol::TimingOptions topt;
  topt.min_runs = opt.min_runs;
  topt.min_seconds = opt.min_seconds;
  topt.warmup_runs = 1;
  topt.warmup_seconds = 0.02;
  topt.input_sets = c.sets;
  // One thread: every library runs in the calling thread, so its CPU time is the work of the
  // call without the waits for a core that a loaded machine adds.
  if (opt.cpu_time) {
    sol::check(threads == 1, "gemm_anchors", "--cpu-time needs --threads 1 (CPU time of the calling thread)");
    topt.clock = sol::TimingOptions::Clock::thread_cpu;
  }

  const bool pair = !opt.no_pair && !opt.cpu_time;  // a wall-clock ceiling beside CPU times would not pair
  const double before = pair ? measure_now(unit, threads) : 0;
  // Rounds interleave the implementations in a rotating order; each keeps its best round's
  // median (neighbours on the shared cores slow whole rounds down, never speed them up).
  std::vector<size_t> order;
  for (size_t i = 0; i < impls.size(); ++i)
    if (impls[i].runner) order.push_back(i);
  for (int round = 0; round < opt.rounds; ++round) {
    for (size_t i : order) {
      ImplResult& r = impls[i];
      const sol::Timing t = sol::time_runs([&](int set) { r.runner->run(set); }, topt);
      if (r.timing.runs == 0 || t.median_s < r.timing.median_s) r.timing = t;
      // Let the last library's worker threads stop spinning before the next one is timed.
      if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!order.empty()) std::rotate(order.begin(), order.begin() + 1, order.end());
  }
  const double after = pair ? measure_now(unit, threads) : 0;
  const double paired = std::max(before, after);

  double peak = cost.flops > 0 ? machine.value(cost.compute, threads) : 0;
  double bw = cost.bytes > 0 ? machine.value(cost.memory, threads) : 0;
  if (paired > 0) (unit == cost.compute ? peak : bw) = paired;
  const sol::Floor floor = sol::roofline_floor(cost, peak, bw);

  report.row(c, threads, cost, floor, cached, unit, paired, cached_ceiling, impls);
  std::string above;
  for (const ImplResult& r : impls)
    if (r.runner && sol::sol_percent(floor, r.timing.median_s) > 100) above += (above.empty() ? "" : ", ") + r.name;
  if (!above.empty())
    report.note("SOL% above 100 (" + above + "): the " + std::string(sol::unit_name(unit)) +
                " ceiling measured beside the case is too low (a noisy measurement, or an access pattern it misses)");
  for (const ImplResult& r : impls) {
    if (!r.runner && !r.why_not.empty()) report.note(r.name + ": " + r.why_not);
    if (r.runner && !r.ok)
      report.note("FAIL: " + r.name + " differs from Sol by " + std::to_string(r.rel_err) + " (tolerance " +
                  std::to_string(tolerance(c)) + ")");
  }
  return all_ok;
}

int run(int argc, char** argv) {
  Options opt;
  CLI::App app{"Sol's GEMM beside oneDNN and OpenBLAS on the shapes of bench/gemm_shapes.json"};
  app.add_option("--shapes", opt.shapes, "shape table (JSON)");
  app.add_option("--filter", opt.filter, "comma-separated words; shapes whose name contains any");
  app.add_option("--max-flops", opt.max_flops, "skip shapes with more FLOPs (e.g. 2e11, 50G, 1T)");
  app.add_option("--dtype", opt.dtypes, "comma-separated input dtypes: f32, bf16, s8 (i8 x i8 -> i32)");
  app.add_option("--bf16-out", opt.bf16_out, "D's dtype for bf16 inputs: bf16 or f32");
  app.add_option("--threads", opt.threads, "comma-separated thread counts; 'all' = every core");
  app.add_flag("--cpu-time", opt.cpu_time,
               "time the calling thread's CPU time (needs --threads 1; no ceiling pairing): stable on a loaded machine");
  app.add_option("--impl", opt.impls, "comma-separated: sol, onednn, openblas");
  app.add_option("--rounds", opt.rounds, "interleaved rounds; each implementation keeps its best median");
  app.add_option("--min-runs", opt.min_runs, "timed runs per round (at least)");
  app.add_option("--min-seconds", opt.min_seconds, "seconds timed per round (at least)");
  app.add_option("--openblas-core", opt.openblas_core,
                 "auto: the best AVX-512 core unless OPENBLAS_CORETYPE is set; native: the library's or the environment's choice; or a core name (Cooperlake, SkylakeX, Haswell, ...)");
  app.add_flag("--no-pair", opt.no_pair, "do not re-measure the bounding ceiling beside the runs");
  app.add_flag("--warm", opt.warm, "never rotate input sets (small cases then run from cache)");
  app.add_flag("--list", opt.list, "list the selected shapes and exit");
  app.add_flag("--json", opt.json, "print the records as a JSON array on stdout (the table goes to stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::vector<GemmShape> shapes;
  std::vector<sol::DType> dtypes;
  std::vector<int> thread_counts;
  std::vector<std::string> impl_names;
  sol::DType bf16_out = sol::DType::bf16;
  try {
    shapes = select_shapes(load_shape_table(opt.shapes), opt.filter, parse_flops(opt.max_flops));
    for (const std::string& d : split(opt.dtypes)) {
      sol::check(d == "f32" || d == "bf16" || d == "s8", "gemm_anchors", "--dtype: '", d,
                 "' but must be f32, bf16 or s8");
      dtypes.push_back(d == "f32" ? sol::DType::f32 : d == "bf16" ? sol::DType::bf16 : sol::DType::i8);
    }
    sol::check(opt.bf16_out == "bf16" || opt.bf16_out == "f32", "gemm_anchors", "--bf16-out = '", opt.bf16_out,
               "' but must be bf16 or f32");
    bf16_out = opt.bf16_out == "bf16" ? sol::DType::bf16 : sol::DType::f32;
    thread_counts = parse_threads(opt.threads);
    impl_names = split(opt.impls);
    for (const std::string& n : impl_names)
      sol::check(n == "sol" || n == "onednn" || n == "openblas", "gemm_anchors", "--impl: '", n,
                 "' but must be sol, onednn or openblas");
    sol::check(opt.rounds >= 1 && opt.min_runs >= 1, "gemm_anchors", "--rounds and --min-runs must be >= 1");
  } catch (const sol::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (opt.list) {
    for (const GemmShape& s : shapes)
      std::printf("%-26s %-44s %10.3f GFLOP\n", s.name.c_str(), s.describe().c_str(), s.flops() / 1e9);
    return 0;
  }

  if (std::find(impl_names.begin(), impl_names.end(), "openblas") != impl_names.end())
    openblas_select_core(opt.openblas_core, argv);
  for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES"})
    if (std::getenv(v))
      std::fprintf(stderr, "gemm_anchors: %s is set; OpenBLAS may then run one thread only\n", v);

  const sol::MachineProfile machine = sol::load_or_measure_machine(false);
  Report report(opt.json ? stderr : stdout, opt.json);
  report.header(machine);
  // As sol bench: cases smaller than 8x the LLC rotate through sets that outgrow it.
  const int64_t cold_bytes = opt.warm ? 0 : 8 * std::max<int64_t>(sol::cpu_features().l3_bytes, 16L << 20);
  bool all_ok = true;
  for (const GemmShape& s : shapes)
    for (sol::DType in : dtypes) {
      const sol::DType out = in == sol::DType::bf16 ? bf16_out : in == sol::DType::i8 ? sol::DType::i32 : in;
      const GemmCase c = make_case(s, in, out, cold_bytes);
      for (int t : thread_counts) all_ok = run_case(c, t, opt, impl_names, machine, report) && all_ok;
    }
  report.finish();
  return all_ok ? 0 : 1;
}

}  // namespace

}  // namespace sol_bench

int main(int argc, char** argv) {
  try {
    return sol_bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_anchors: %s\n", e.what());
    return 2;
  }
}
