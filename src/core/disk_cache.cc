#include "core/disk_cache.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "sol/error.h"

namespace sol::disk_cache {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool exists(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

}  // namespace

std::string digest(std::string_view text) {
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (uint64_t& x : h)
    for (unsigned char c : text) x = (x ^ c) * 0x100000001b3ull, x ^= x >> 29;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h[0]),
                static_cast<unsigned long long>(h[1]));
  return buf;
}

std::string sol_cache_root() {
  const std::string xdg = env("XDG_CACHE_HOME");
  return (xdg.empty() ? env("HOME") + "/.cache" : xdg) + "/sol";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void make_dirs(const std::string& path, std::string_view who) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  struct stat st {};
  check(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), who, "cannot create cache directory ", path);
}

std::string unique_tag() {
  return std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
}

void publish_file(const std::string& path, std::string_view bytes, std::string_view who) {
  const std::string tmp = path + ".tmp." + unique_tag();
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    check(bool(out), who, "cannot write ", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail(who, "cannot publish ", path, ": ", std::strerror(errno));
  }
}

bool elf_looks_complete(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  Elf64_Ehdr h{};
  struct stat st {};
  const bool read_all = ::pread(fd, &h, sizeof h, 0) == ssize_t(sizeof h) && ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!read_all || std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64)
    return false;
  const uint64_t table_end = uint64_t(h.e_shoff) + uint64_t(h.e_shnum) * h.e_shentsize;
  return h.e_shnum > 0 && table_end <= uint64_t(st.st_size);
}

Entry get_or_build(const std::string& dir, const std::string& name, std::string_view who,
                   const std::function<void(const std::string& tmp)>& build,
                   const std::function<bool(const std::string& path)>& valid) {
  const std::string path = dir + "/" + name;
  if (exists(path) && valid(path)) return {path, true};
  make_dirs(dir, who);
  const int lock = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  check(lock >= 0, who, "cannot open a lock file in ", dir);
  ::flock(lock, LOCK_EX);  // another process building the same entry finishes first
  struct Unlock {
    int fd;
    ~Unlock() {
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  } unlock{lock};
  if (exists(path) && valid(path)) return {path, true};

  const std::string tmp = path + ".tmp." + unique_tag();
  try {
    build(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (!valid(tmp)) {
    ::unlink(tmp.c_str());
    fail(who, "the entry built for ", path, " is not valid");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail(who, "cannot publish ", path, ": ", std::strerror(errno));
  }
  return {path, false};
}

}  // namespace sol::disk_cache
