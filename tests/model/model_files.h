#pragma once
// Paths of the shipped model/hardware/plan/workload files, found from this source file so the
// tests run from any directory.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace sol::test {

// __FILE__ is relative when ccache rewrites paths (base_dir), so fall back to the first
// directory above the test executable that holds the shipped models.
inline std::filesystem::path repository_root() {
  namespace fs = std::filesystem;
  fs::path from_source = fs::path(__FILE__).parent_path().parent_path().parent_path();
  if (from_source.is_absolute() && fs::exists(from_source / "models")) return from_source;
  std::error_code ec;
  for (fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path(); !dir.empty();
       dir = dir.parent_path()) {
    if (fs::exists(dir / "models" / "deepseek-v3.json")) return dir;
    if (dir == dir.root_path()) break;
  }
  return from_source;
}

inline std::string shipped(const std::string& kind, const std::string& name) {
  return (repository_root() / kind / (name + ".json")).string();
}

// Every shipped file of a kind ("models", "hardware", ...), by name.
inline std::vector<std::string> all_shipped(const std::string& kind) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(repository_root() / kind))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace sol::test
