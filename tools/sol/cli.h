#pragma once
// Shared pieces of the `sol` subcommands: exit codes, the record's JSON form, table printing.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sol/bench.h"
#include "sol/hw.h"

namespace sol::cli {

enum Exit { kOk = 0, kCheckFailed = 1, kBadUsage = 2 };

// Registers each subcommand on the app; each returns a callback run after parsing.
void add_hw(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_check(CLI::App& app, int& exit_code);
void add_report(CLI::App& app, int& exit_code);
void add_model(CLI::App& app, int& exit_code);
void add_comm(CLI::App& app, int& exit_code);
void add_tune(CLI::App& app, int& exit_code);

nlohmann::json record_json(const BenchRecord& r);
// Fixed-width table: op, shape, dtype, threads, median, TFLOP/s, GB/s, bound, SOL%, check.
std::string records_table(const std::vector<BenchRecord>& records);
// "!!" marker and warning for a SOL% above 100: the ceiling under it must be wrong.
bool sol_over_limit(const BenchRecord& r);
bool ceiling_unsteady(const BenchRecord& r);  // a paired ceiling moved more than kCeilingMovedLimit
bool in_cache_measured(const BenchRecord& r);  // the record carries an in-cache SOL%

// The profile from the cache, or measured now with progress on stderr.
MachineProfile machine_for_cli(bool remeasure, bool quiet);

}  // namespace sol::cli
