// The CLI's op arguments as `sol bench OP --NAME VALUE ...` reads them: the first line of the
// input is the op name, each further line NAME=VALUE. Every input either resolves or throws
// sol::Error naming the op or the argument; as printed by the CLI (tools/sol/printable.h) the
// message holds no raw control byte or broken UTF-8.
#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include "fuzz_check.h"
#include "printable.h"
#include "sol/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string op, line;
  std::getline(in, op);
  std::map<std::string, std::string> flags;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    flags[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  try {
    const sol::OpInfo& info = sol::find_op(op);
    info.make(sol::resolve_params(info, flags), 0);
    for (const auto& [name, value] : flags) sol::parse_size(value, "sol bench: --" + name);
  } catch (const sol::Error& e) {
    const std::string shown = sol::cli::printable(e.what());
    if (shown.find("--") == std::string::npos && shown.find("unknown op") == std::string::npos &&
        shown.find("unknown parameter") == std::string::npos)
      sol::fuzz::finding("sol::Error does not name the op or argument", shown);
    if (sol::cli::printable(shown) != shown) sol::fuzz::finding("printable() is not idempotent", shown);
    for (char c : shown)
      if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') sol::fuzz::finding("raw control byte", shown);
  } catch (const std::exception& e) {
    sol::fuzz::finding("an exception other than sol::Error escaped", e.what());
  }
  return 0;
}
