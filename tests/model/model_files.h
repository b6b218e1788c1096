#pragma once
// Paths of the shipped model/hardware/plan/workload files, found from this source file so the
// tests run from any directory.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace sol::test {

inline std::filesystem::path repository_root() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
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
