#pragma once
// Sol's on-disk caches (JIT objects, cubins): keys, directories, and building an entry safely
// when several processes want it at once. The protocol: an entry at DIR/NAME is only ever
// created by rename() of a finished private temporary, so a reader never sees half a file; a
// builder holds flock(DIR/NAME.lock) so one process builds while the others wait and then find
// the entry; an entry that fails its validity check (truncated, corrupted) is rebuilt in place.
// The tile compiler's CPU JIT and the CUDA runtime's NVRTC JIT both use it.
#include <functional>
#include <string>
#include <string_view>

namespace sol::disk_cache {

// 128-bit hex digest (two FNV-1a lanes with different offsets): ample for a cache key.
std::string digest(std::string_view text);

// $XDG_CACHE_HOME/sol, else $HOME/.cache/sol.
std::string sol_cache_root();

// The whole file, or "" when it cannot be read.
std::string read_file(const std::string& path);

// mkdir -p; throws sol::Error naming `who` when the directory cannot be made.
void make_dirs(const std::string& path, std::string_view who);

// A name no other process or thread uses: "PID.RANDOM".
std::string unique_tag();

// Writes `bytes` to a private temporary beside `path` and renames it onto `path`.
void publish_file(const std::string& path, std::string_view bytes, std::string_view who);

// An ELF file whose section header table lies within the file: catches a truncated or
// overwritten shared object or cubin before the loader sees it.
bool elf_looks_complete(const std::string& path);

struct Entry {
  std::string path;
  bool hit = false;  // found on disk, not built by this call
};

// DIR/NAME if it exists and valid(path) holds; otherwise build(tmp) writes the entry to the
// private path tmp under the lock and it is renamed onto DIR/NAME. build throws to fail (the
// temporary is removed). `who` names the caller in errors.
Entry get_or_build(const std::string& dir, const std::string& name, std::string_view who,
                   const std::function<void(const std::string& tmp)>& build,
                   const std::function<bool(const std::string& path)>& valid);

}  // namespace sol::disk_cache
