// sol — the command line: hw, tune, bench, check, report. Exit codes: 0 success, 1 a check failed,
// 2 bad usage or bad input.
#include <cstdio>
#include <exception>

#include "cli.h"
#include "printable.h"
#include "sol/error.h"

namespace sol::cli { void add_compile(CLI::App& app, int& exit_code); }  // cmd_compile.cc

int main(int argc, char** argv) {
  CLI::App app{"Sol: operators measured against the machine's physical limits (SOL%)", "sol"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  int exit_code = sol::cli::kOk;
  sol::cli::add_hw(app, exit_code);
  sol::cli::add_tune(app, exit_code);
  sol::cli::add_bench(app, exit_code);
  sol::cli::add_check(app, exit_code);
  sol::cli::add_report(app, exit_code);
  sol::cli::add_model(app, exit_code);
  sol::cli::add_comm(app, exit_code);
  sol::cli::add_compile(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : sol::cli::kBadUsage;
  } catch (const sol::Error& e) {
    std::fprintf(stderr, "sol: error: %s\n", sol::cli::printable(e.what()).c_str());
    return sol::cli::kBadUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sol: internal error: %s\n", sol::cli::printable(e.what()).c_str());
    return sol::cli::kCheckFailed;
  }
  return exit_code;
}
