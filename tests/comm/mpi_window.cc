// comm::Window under mpirun: regions of different sizes (0 included), direct reads of peers'
// regions, bounded get/put (small and large), fences ordering writes and reads round after
// round, the split fence, bad ranges, and a window over ranks of two (emulated) nodes refused.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_check.h"
#include "sol/comm_window.h"

namespace {

using sol::comm::Group;
using sol::comm::Window;
using sol::comm::testing::Checker;

size_t region_bytes(int rank) { return rank == 1 ? 0 : size_t(4096 * rank + 100 + 3 * rank); }
uint8_t byte_of(int rank, size_t i) { return uint8_t((rank * 131 + i * 7 + (i >> 8)) % 251 + 1); }

template <class F>
bool throws_error(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const sol::Error& e) {
    if (what) *what = e.what();
    return true;
  }
  return false;
}

void regions_and_get(const Group& g, Checker& c) {
  const int P = g.size(), me = g.rank();
  Window w(g, region_bytes(me));
  c.expect(w.local() == w.peer(me), "local() is peer(rank)");
  c.expect(reinterpret_cast<uintptr_t>(w.local()) % 4096 == 0, "region page-aligned");
  bool zero = true;
  for (size_t i = 0; i < region_bytes(me); ++i) zero &= w.local()[i] == std::byte{0};
  c.expect(zero, "region starts zero-filled");
  for (int r = 0; r < P; ++r)
    c.expect(w.bytes(r) == region_bytes(r), "bytes(" + std::to_string(r) + ") = " + std::to_string(w.bytes(r)));
  for (size_t i = 0; i < region_bytes(me); ++i) w.local()[i] = std::byte{byte_of(me, i)};
  w.fence();
  for (int r = 0; r < P; ++r) {
    const size_t n = region_bytes(r);
    // Direct reads of the whole region.
    int64_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += uint8_t(w.peer(r)[i]) != byte_of(r, i);
    c.expect(wrong == 0, "peer(" + std::to_string(r) + "): " + std::to_string(wrong) + " wrong bytes");
    // get of odd pieces, the whole region, and nothing.
    std::vector<uint8_t> got(n + 1, 0xEE);
    for (size_t off : {size_t(0), n / 3, n > 0 ? n - 1 : 0}) {
      const size_t len = n - off;
      std::fill(got.begin(), got.end(), 0xEE);
      w.get(got.data(), r, off, len);
      wrong = 0;
      for (size_t i = 0; i < len; ++i) wrong += got[i] != byte_of(r, off + i);
      c.expect(wrong == 0 && got[len] == 0xEE, "get from rank " + std::to_string(r) + " at " + std::to_string(off));
    }
    w.get(got.data(), r, n, 0);
  }
  w.fence();  // nobody rewrites or frees a region a peer still reads
}

void puts_and_rounds(const Group& g, Checker& c) {
  const int P = g.size(), me = g.rank();
  // Every rank writes one slot of every region (its own slot), then a large block to the next
  // rank (through the vector copy: >= 64 KiB).
  const size_t slot = 72, big = size_t(300) << 10;
  Window w(g, slot * size_t(P) + big);
  std::vector<uint8_t> mine(big);
  for (int r = 0; r < P; ++r) {
    for (size_t i = 0; i < slot; ++i) mine[i] = byte_of(me * 7 + r, i);
    w.put(r, slot * size_t(me), mine.data(), slot);
  }
  for (size_t i = 0; i < big; ++i) mine[i] = byte_of(me, i);
  w.put((me + 1) % P, slot * size_t(P), mine.data(), big);
  w.fence();
  int64_t wrong = 0;
  for (int s = 0; s < P; ++s)
    for (size_t i = 0; i < slot; ++i) wrong += uint8_t(w.local()[slot * size_t(s) + i]) != byte_of(s * 7 + me, i);
  c.expect(wrong == 0, "put slots: " + std::to_string(wrong) + " wrong bytes");
  const int from = (me + P - 1) % P;
  wrong = 0;
  for (size_t i = 0; i < big; ++i) wrong += uint8_t(w.local()[slot * size_t(P) + i]) != byte_of(from, i);
  c.expect(wrong == 0, "large put: " + std::to_string(wrong) + " wrong bytes");

  // Rounds: write, fence, read every peer's value, fence. A fence that did not order writes
  // before reads (or let a rank run a round ahead) shows up as a stale or future value.
  int64_t stale = 0;
  for (uint64_t round = 1; round <= 200; ++round) {
    const uint64_t value = round * 1000 + uint64_t(me);
    std::memcpy(w.local(), &value, sizeof value);
    if (round % 2) {
      w.fence();
    } else {
      w.fence_start();
      while (!w.fence_test()) {
      }
      w.fence_wait();
    }
    for (int r = 0; r < P; ++r) {
      uint64_t seen = 0;
      w.get(&seen, r, 0, sizeof seen);
      stale += seen != round * 1000 + uint64_t(r);
    }
    w.fence();
  }
  c.expect(stale == 0, "fence rounds: " + std::to_string(stale) + " stale or early values");
}

void bad_ranges(const Group& g, Checker& c) {
  const int P = g.size(), me = g.rank();
  Window w(g, region_bytes(me));
  char buf[16];
  std::string what;
  const int last = P - 1;
  const size_t n = region_bytes(last);
  c.expect(throws_error([&] { w.get(buf, last, n, 1); }, &what) &&
               what.find("rank " + std::to_string(last) + "'s region, which holds " + std::to_string(n)) !=
                   std::string::npos,
           "get past the end: " + what);
  c.expect(throws_error([&] { w.put(last, SIZE_MAX, buf, 2); }), "put at an offset that wraps");
  c.expect(throws_error([&] { w.get(buf, P, 0, 1); }, &what) && what.find("outside") != std::string::npos,
           "get from a rank outside the group: " + what);
  c.expect(throws_error([&] { w.peer(-1); }), "peer(-1)");
  if (P > 1) c.expect(throws_error([&] { w.put(1, 0, buf, 1); }), "put into an empty region");
  w.fence();  // the group still works after the errors
}

}  // namespace

int main() {
  const Group& world = Group::world();
  Checker c(world.rank());
  try {
    if (world.num_nodes() == 1) {
      regions_and_get(world, c);
      puts_and_rounds(world, c);
      bad_ranges(world, c);
    } else {
      std::string what;
      c.expect(throws_error([&] { Window w(world, 64); }, &what) && what.find("spans") != std::string::npos,
               "window over two nodes: " + what);
    }
    // A node-local group always works, and a split group gets windows of its own.
    regions_and_get(world.local(), c);
    puts_and_rounds(world.local(), c);
    const Group pair = world.local().split(world.local().rank() / 2, world.local().rank());
    puts_and_rounds(pair, c);
  } catch (const std::exception& e) {
    c.expect(false, std::string("exception: ") + e.what());
  }
  return c.finish("mpi_window");
}
