// Creating, exchanging, mapping and unlinking the per-rank shm segments.
#include "comm/shared_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "sol/error.h"

namespace sol::comm::detail {

namespace {

constexpr int kNameBytes = 64;

std::string unique_name() {
  static std::atomic<int> counter{0};
  return "/sol-comm." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

std::byte* map_segment(const char* name, size_t bytes, bool create) {
  int fd = ::shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) fail("comm", "shm_open(", name, ") failed: ", std::strerror(errno));
  if (create && ::ftruncate(fd, off_t(bytes)) != 0) {
    int err = errno;
    ::close(fd);
    ::shm_unlink(name);
    fail("comm", "ftruncate(", name, ", ", bytes, ") failed: ", std::strerror(err));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (create) ::shm_unlink(name);
    fail("comm", "mmap of ", bytes, " bytes of ", name, " failed: ", std::strerror(err));
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

SharedSegments::SharedSegments(MPI_Comm local_comm, const SegmentLayout& layout) : layout_(layout) {
  int size = 0;
  MPI_Comm_rank(local_comm, &rank_);
  MPI_Comm_size(local_comm, &size);
  check(size <= kMaxLocalRanks, "comm", size, " ranks on one node but at most ", kMaxLocalRanks,
        " are supported");
  layout_.ranks = size;
  const size_t bytes = layout_.total_bytes();
  std::string own = unique_name();
  std::byte* own_base = map_segment(own.c_str(), bytes, true);
  auto* own_control = new (own_base) ControlBlock();
  own_control->pid = ::getpid();

  std::vector<char> names(size_t(size) * kNameBytes);
  char mine[kNameBytes] = {};
  std::strncpy(mine, own.c_str(), kNameBytes - 1);
  MPI_Allgather(mine, kNameBytes, MPI_CHAR, names.data(), kNameBytes, MPI_CHAR, local_comm);
  bases_.resize(size_t(size));
  pids_.resize(size_t(size));
  for (int r = 0; r < size; ++r) {
    bases_[size_t(r)] = r == rank_ ? own_base : map_segment(&names[size_t(r) * kNameBytes], bytes, false);
  }
  // Every peer has mapped every segment once all have passed this barrier; the names are no
  // longer needed, and from here on the segments vanish with the last mapping.
  MPI_Barrier(local_comm);
  ::shm_unlink(own.c_str());
  for (int r = 0; r < size; ++r) pids_[size_t(r)] = control(r).pid;
}

SharedSegments::~SharedSegments() {
  for (std::byte* b : bases_)
    if (b) ::munmap(b, layout_.total_bytes());
}

int64_t SharedSegments::own_offset(const void* p, size_t bytes) const {
  auto* q = static_cast<const std::byte*>(p);
  const std::byte* b = base(rank_);
  if (q < b || q + bytes > b + layout_.total_bytes()) return -1;
  return q - b;
}

}  // namespace sol::comm::detail
