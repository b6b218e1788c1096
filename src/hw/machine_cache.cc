// The machine profile cache: one JSON object keyed by "<cpu model>|<cores>", so a home
// directory shared between machines keeps each machine's own ceilings.
#include <stdlib.h>  // mkstemp
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

using nlohmann::json;

std::string cache_key(const std::string& cpu_model, int cores) {
  return cpu_model + "|" + std::to_string(cores);
}

void warn(const std::string& message) { std::cerr << "sol: warning: " << message << "\n"; }

// The whole cache file as an object; missing is empty, corrupt is empty with a warning (the
// cache only saves time, it must never stop a run).
json read_cache_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json::object();
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    warn("ignoring corrupt machine cache " + path + " (not a JSON object); it will be rewritten");
    return json::object();
  }
  return j;
}

// Write a sibling temp file, then rename: a reader sees the old file or the new one, never half.
void write_atomically(const std::string& path, const std::string& text) {
  std::filesystem::path target(path);
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  check(!ec, "machine cache", "cannot create ", target.parent_path().string(), ": ", ec.message());
  std::string temp = path + ".XXXXXX";
  int fd = mkstemp(temp.data());
  check(fd >= 0, "machine cache", "cannot create a temp file beside ", path, ": ",
        std::strerror(errno));
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += size_t(n);
  }
  bool ok = written == text.size() && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && std::rename(temp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    std::remove(temp.c_str());
    fail("machine cache", "cannot write ", path, ": ", std::strerror(err));
  }
}

}  // namespace

std::string machine_cache_path() {
  // XDG: a relative XDG_CACHE_HOME is invalid and must be ignored.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/sol/machine.json";
  const char* home = std::getenv("HOME");
  check(home && *home, "machine cache", "neither XDG_CACHE_HOME nor HOME is set");
  return std::string(home) + "/.cache/sol/machine.json";
}

std::optional<MachineProfile> load_cached_machine() {
  std::string path;
  try {
    path = machine_cache_path();
  } catch (const Error&) {
    return std::nullopt;  // no cache location: nothing cached
  }
  const CpuFeatures& f = cpu_features();
  json all = read_cache_file(path);
  auto entry = all.find(cache_key(f.model_name, f.logical_cpus));
  if (entry == all.end()) return std::nullopt;
  try {
    MachineProfile p = MachineProfile::from_json(entry->dump());
    if (p.cpu_model == f.model_name && p.cores == f.logical_cpus) return p;
    warn("ignoring machine cache entry in " + path + ": it describes another machine");
  } catch (const Error& e) {
    warn("ignoring machine cache entry in " + path + ": " + e.what());
  }
  return std::nullopt;
}

void save_cached_machine(const MachineProfile& p) {
  std::string path = machine_cache_path();
  json all = read_cache_file(path);
  all[cache_key(p.cpu_model, p.cores)] = json::parse(p.to_json());
  write_atomically(path, all.dump(2) + "\n");
}

MachineProfile load_or_measure_machine(bool remeasure, const std::function<void(Unit)>& progress) {
  if (!remeasure)
    if (std::optional<MachineProfile> cached = load_cached_machine()) return *cached;
  MachineProfile p = measure_machine(progress);
  try {
    save_cached_machine(p);
  } catch (const Error& e) {
    warn(std::string(e.what()) + " (the measured profile is used, but not cached)");
  }
  return p;
}

}  // namespace sol
