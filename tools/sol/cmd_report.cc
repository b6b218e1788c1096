// sol report [--out DIR] [--json] [--no-pair] [--check-shapes] [--cold-bytes N] — the whole
// suite against this machine's ceilings: a table on stdout, and report.md, report.json and
// roofline.svg in DIR.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli.h"
#include "roofline_svg.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/threads.h"
#include "sol/timing.h"

namespace sol::cli {

namespace {

struct ReportArgs {
  std::string out = "sol-report";
  bool json = false, remeasure = false, no_pair = false, check_shapes = false;
  double min_seconds = 0.2;
  std::string cold_bytes;  // empty: prepare_case's default, 8x the LLC
};

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  check(bool(f), "report", "cannot write ", p.string());
  f << text;
  check(bool(f), "report", "failed writing ", p.string());
}

std::string markdown(const MachineProfile& m, const std::vector<BenchRecord>& records, bool paired,
                     int64_t cold_bytes) {
  std::string s = "# Sol report\n\n";
  s += fmt::format("Machine: {} ({} cores), ceilings measured {}. Active path: {}.\n\n", m.cpu_model,
                   m.cores, m.measured_at, isa_name(active_isa()));
  if (cold_bytes > 0)
    s += fmt::format("Input sets rotated through {} bytes per case (`--cold-bytes`), not 8x the LLC: a memory-bound "
                     "case may read part of its data from the LLC, and its SOL% is then too high.\n\n",
                     cold_bytes);
  s += paired ? "SOL% = floor / median time, floor = max(FLOPs / peak, bytes / bandwidth), with the "
                "bounding ceiling re-measured beside each op (`paired`); the cached ceiling is shown "
                "beside it.\n\n"
              : "SOL% = floor / median time, floor = max(FLOPs / peak, bytes / bandwidth), against the "
                "cached ceilings only (`--no-pair`: nothing re-measured beside the ops, so a change of the "
                "machine's state since the ceilings were measured goes unseen).\n\n";
  s += "## Ceilings\n\n| unit | 1 thread | all threads | | note |\n|---|---:|---:|---|---|\n";
  for (const Ceiling& c : m.ceilings) {
    double sc = unit_display_scale(c.unit);
    if (c.available)
      s += fmt::format("| {} | {:.1f} | {:.1f} | {} | {} |\n", unit_name(c.unit), c.one_thread / sc,
                       c.all_threads / sc, unit_label(c.unit), c.note);
    else
      s += fmt::format("| {} | - | - | | {} |\n", unit_name(c.unit), c.note);
  }
  s += "\n## Ops\n\n`in-cache SOL%`: the same op at fewer rows (the shape named), its data kept in L2, timed "
       "the same way and held to the same floor. Far above SOL%: memory holds the op back. Near SOL% or below "
       "the target: the op's own instructions do, and no memory pattern would lift it.\n\n"
       "| op | shape | dtype | threads | median | TFLOP/s | GB/s | bound | ceiling (paired / cached) | SOL% | SOL% vs cached | in-cache SOL% | check |\n"
       "|---|---|---|---:|---:|---:|---:|---|---|---:|---:|---|---|\n";
  for (const auto& r : records) {
    double sc = unit_display_scale(r.ceiling_unit);
    std::string in_cache = in_cache_measured(r) ? fmt::format("{:.1f} ({})", r.in_cache_sol_pct, r.in_cache_shape) : "-";
    const std::string paired_value = r.ceiling_paired > 0 ? fmt::format("{:.1f}", r.ceiling_paired / sc) : "-";
    s += fmt::format("| {} | {} | {} | {} | {:.3f} ms | {:.3f} | {:.1f} | {} | {} {} / {:.1f} {} | {:.1f}{} | {:.1f} | {} | {} |\n",
                     r.op, r.shape, r.dtype, r.threads, r.timing.median_s * 1e3, r.tflops, r.gbps,
                     bound_name(r.floor.bound), unit_name(r.ceiling_unit), paired_value,
                     r.ceiling_cached / sc, unit_label(r.ceiling_unit), r.sol_pct,
                     sol_over_limit(r)     ? " **(>100%: ceiling wrong)**"
                     : ceiling_unsteady(r) ? fmt::format(" (uncertain: the ceiling moved {:.2f}x)", r.ceiling_moved)
                                           : "",
                     r.sol_pct_cached, in_cache,
                     !r.check ? "-" : r.check->pass ? "ok" : "**FAIL** " + r.check->detail);
  }
  s += "\n![roofline](roofline.svg)\n";
  return s;
}

}  // namespace

void add_report(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Run every registered op over its shape table; write report.md/.json and roofline.svg");
  cmd->add_option("--out", a->out, "Output folder (default ./sol-report)");
  cmd->add_flag("--json", a->json, "Also print the records as a JSON array on stdout");
  cmd->add_flag("--remeasure", a->remeasure, "Re-measure the machine's ceilings first");
  cmd->add_flag("--no-pair", a->no_pair,
                "Do not re-measure the bounding ceilings beside each op (SOL% against the cached ones; "
                "several times faster where the memory ceilings take long to measure)");
  cmd->add_option("--min-time", a->min_seconds, "Seconds of timed runs per case (default 0.2)")
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_flag("--check-shapes", a->check_shapes,
                "Run each op over the small cases of `sol check` instead of its report table: every part "
                "of the report in seconds, for smoke tests (the timings say little at those sizes)");
  cmd->add_option("--cold-bytes", a->cold_bytes,
                  "Bytes a case's rotated input sets cover together (default 8x the LLC). Less fills faster "
                  "but lets the LLC serve part of a memory-bound case's reads (SOL% too high): for smoke tests");
  cmd->callback([a, &exit_code] {
    namespace fs = std::filesystem;
    const int64_t cold_bytes = a->cold_bytes.empty() ? 0 : parse_size(a->cold_bytes, "report: --cold-bytes");
    check(a->cold_bytes.empty() || cold_bytes > 0, "report", "--cold-bytes = ", a->cold_bytes, ": must be > 0");
    fs::create_directories(a->out);
    MachineProfile machine = machine_for_cli(a->remeasure, false);

    struct Case { const OpInfo* op; std::map<std::string, std::string> params; };
    std::vector<Case> cases;
    for (const auto& op : registered_ops())
      for (const auto& c : a->check_shapes          ? op.check_table
                           : op.report_table.empty() ? op.bench_table
                                                     : op.report_table)
        cases.push_back({&op, c});
    const int all = num_threads();
    std::vector<int> thread_counts = {1};
    if (all > 1) thread_counts.push_back(all);
    const size_t jobs = cases.size() * thread_counts.size();

    std::vector<BenchRecord> records;
    bool failed = false;
    for (const Case& c : cases) {
      // One case, its buffers filled once, timed at every thread count.
      PreparedCase prepared = prepare_case(*c.op, resolve_params(*c.op, c.params), false, cold_bytes);
      for (int threads : thread_counts) {
        BenchOptions opt;
        opt.threads = threads;
        opt.run_check = threads == all;  // once per shape, on the multi-threaded path
        opt.timing.min_seconds = a->min_seconds;
        opt.pair_ceiling = !a->no_pair;
        fmt::print(stderr, "[{:>2}/{}] {} ", records.size() + 1, jobs, c.op->name);
        const double started = now_seconds();
        BenchRecord r = bench_prepared(*c.op, prepared, machine, opt);
        fmt::print(stderr, "{} {} t{}: {:.3f} ms, {:.1f}% SOL{}{} ({:.1f} s)\n", r.shape, r.dtype, r.threads,
                   r.timing.median_s * 1e3, r.sol_pct,
                   in_cache_measured(r) ? fmt::format(", in cache {:.1f}%", r.in_cache_sol_pct) : "",
                   r.check && !r.check->pass ? "  CHECK FAILED" : "", now_seconds() - started);
        failed |= r.check && !r.check->pass;
        records.push_back(std::move(r));
      }
    }

    nlohmann::json recs = nlohmann::json::array();
    for (const auto& r : records) recs.push_back(record_json(r));
    nlohmann::json doc = {{"machine", nlohmann::json::parse(machine.to_json())}, {"records", recs}};
    write_file(fs::path(a->out) / "report.json", doc.dump(2) + "\n");
    write_file(fs::path(a->out) / "report.md", markdown(machine, records, !a->no_pair, cold_bytes));
    write_file(fs::path(a->out) / "roofline.svg", roofline_svg(machine, records));

    if (a->json) fmt::print("{}\n", recs.dump(2));
    else fmt::print("{}", records_table(records));
    for (const auto& r : records)
      if (sol_over_limit(r))
        fmt::print(stderr, "WARNING: {} {} {} t{} reports {:.1f}% SOL: above the ceiling, so the ceiling is wrong\n",
                   r.op, r.shape, r.dtype, r.threads, r.sol_pct);
    fmt::print(stderr, "wrote {}/report.md, report.json, roofline.svg\n", a->out);
    exit_code = failed ? kCheckFailed : kOk;
  });
}

}  // namespace sol::cli
