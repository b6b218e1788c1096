// sol compile FILE --target cpu|cuda --emit ir|cpp|cuda|so [--dump-after PASS]...
// The tile compiler from the command line: the lowered IR, the generated source, or a shared
// object in the JIT cache (its path printed). Errors name the file and line of the program.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::cli {

void add_compile(CLI::App& app, int& exit_code) {
  struct Args {
    std::string file, target = "cpu", emit = "ir";
    std::vector<std::string> dump_after;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a tile program (examples/tile/*.tile; docs/compiler.md)");
  cmd->add_option("file", args->file, "tile program (text form)")->required();
  cmd->add_option("--target", args->target, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--emit", args->emit, "ir (after all passes), cpp, cuda or so")
      ->check(CLI::IsMember({"ir", "cpp", "cuda", "so"}));
  cmd->add_option("--dump-after", args->dump_after,
                  "print the IR after this pass to stderr (repeatable; 'all', 'input' or a pass name)");
  cmd->callback([args, &exit_code] {
    std::error_code ec;
    if (std::filesystem::is_directory(args->file, ec)) fail("sol compile", args->file, " is a directory, not a .tile file");
    std::ifstream in(args->file);
    if (!in) fail("sol compile", "cannot read ", args->file);
    std::ostringstream text;
    text << in.rdbuf();
    const tile::Program program = tile::parse(text.str(), args->file);
    tile::CompileOptions opt;
    opt.target = args->target == "cuda" ? tile::Target::cuda : tile::Target::cpu;
    opt.dump_after = args->dump_after;
    opt.cpu = tile::cpu_target_here();  // the IR and C++ shown are what this machine compiles
    if (args->emit == "cuda") opt.target = tile::Target::cuda;
    if (opt.target == tile::Target::cuda)
      check(args->emit != "so" && args->emit != "cpp", "sol compile",
            "--target cuda emits ir or cuda (compile the .cu with nvcc; see docs/compiler.md)");
    if (args->emit == "cpp" && opt.target != tile::Target::cpu) fail("sol compile", "--emit cpp needs --target cpu");
    if (args->emit == "so") {
      tile::CompileInfo info;
      auto kernel = tile::compile(program, opt, &info);
      std::cout << kernel->library_path() << "\n";
      std::cerr << (info.disk_hit ? "cache hit" : "compiled") << " in " << info.seconds << " s\n";
    } else {
      const tile::Program lowered = tile::lower(program, opt);
      std::cout << (args->emit == "ir"    ? tile::print(lowered)
                    : args->emit == "cpp" ? tile::emit_cpp(lowered)
                                          : tile::emit_cuda(lowered));
    }
    exit_code = kOk;
  });
}

}  // namespace sol::cli
