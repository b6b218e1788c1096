// Finding and loading the shipped JSON inputs. A NAME is looked up as KIND/NAME.json under
// $SOL_DATA_DIR, then in the folders above the running executable (build/bin/sol finds the
// repository's models/), then above the current directory; anything with a '/' or ending in
// .json is a path.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
namespace fs = std::filesystem;

std::vector<fs::path> data_roots() {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("SOL_DATA_DIR")) roots.emplace_back(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && dir.has_relative_path(); dir = dir.parent_path()) {
    roots.push_back(dir);
    roots.push_back(dir / "share" / "sol");
  }
  for (fs::path dir = fs::current_path(ec); !ec && dir.has_relative_path();
       dir = dir.parent_path())
    roots.push_back(dir);
  return roots;
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  check(!fs::is_directory(path, ec), "model", path.string(), " is a directory, not a JSON file");
  std::ifstream in(path);
  check(in.good(), "model", "cannot read ", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

// Returns {text, origin}.
std::pair<std::string, std::string> locate(const std::string& kind, const std::string& name) {
  check(!name.empty(), "model", "empty ", kind, " name");
  if (is_path(name)) return {read_file(name), name};
  for (const fs::path& root : data_roots()) {
    fs::path candidate = root / kind / (name + ".json");
    if (fs::is_regular_file(candidate)) return {read_file(candidate), candidate.string()};
  }
  std::string known;
  for (const std::string& n : shipped_names(kind)) known += (known.empty() ? "" : ", ") + n;
  fail("model", "no ", kind, " named '", name, "' (shipped: ",
       known.empty() ? std::string("none found; set SOL_DATA_DIR") : known,
       "); pass a path to a JSON file instead");
}
}  // namespace

std::vector<std::string> shipped_names(const std::string& kind) {
  for (const fs::path& root : data_roots()) {
    std::error_code ec;
    if (!fs::is_directory(root / kind, ec)) continue;
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root / kind, ec))
      if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  return {};
}

ModelConfig load_model_config(const std::string& name_or_path) {
  auto [text, origin] = locate("models", name_or_path);
  return parse_model_config(text, origin);
}

HardwareSpec load_hardware_spec(const std::string& name_or_path) {
  if (name_or_path == "this") return hardware_from_machine(load_or_measure_machine(false));
  auto [text, origin] = locate("hardware", name_or_path);
  return parse_hardware_spec(text, origin);
}

ParallelPlan load_parallel_plan(const std::string& name_or_path) {
  auto [text, origin] = locate("plans", name_or_path);
  return parse_parallel_plan(text, origin);
}

Workload load_workload(const std::string& name_or_path) {
  auto [text, origin] = locate("workloads", name_or_path);
  return parse_workload(text, origin);
}

}  // namespace sol

namespace sol {

Efficiency load_efficiency(const std::string& name_or_path) {
  auto [text, origin] = locate("hardware/calibration", name_or_path);
  return parse_efficiency(text, origin);
}

}  // namespace sol
